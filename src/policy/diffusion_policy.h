// The diffusion policy (Chi et al. 2023, DiffusionUnetHybridImagePolicy with obs_as_global_cond)
// with our ViT as its observation encoder, and Crossway Diffusion's auxiliary reconstruction
// (Li et al. 2024) as an option: docs/policy.md, "The policy".
//
// Observations: the last obs_horizon camera images (RGB in [0, 1], [B, To, 3, S, S] at the
// encoder's input size) and agent positions ([B, To, 2], workspace pixels); a low-dim policy
// (PolicyObservation::kLowdim) has no encoder and takes no images (pass an undefined tensor), its
// "agent_pos" is the whole low-dim vector [B, To, 6] (lowdim_observation.h). Actions: commanded
// agent positions, a chunk of pred_horizon steps of which action_horizon are executed, starting
// at the last observation (index To - 1), as Diffusion Policy does.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "models/model_registry.h"
#include "policy/action_normalizer.h"
#include "policy/conditional_unet1d.h"
#include "policy/lowdim_observation.h"
#include "policy/crossway_decoder.h"
#include "policy/noise_scheduler.h"
#include "policy/observation_readout.h"

namespace sparsevit::models {
class VisionTransformer;
}

namespace sparsevit::policy {

struct DiffusionPolicyConfig {
  std::string encoder_model = "vit_nano_patch8_48";  // a registered ViT (class token or pooled features)
  models::ModelOptions encoder;                      // attention, shape overrides, global_pool
  int64_t obs_horizon = 2, pred_horizon = 16, action_horizon = 8;
  // kImage: ViT features of each frame + the agent position; kLowdim: no encoder, the agent
  // position and block pose (lowdim_observation.h), the baseline that needs no vision.
  PolicyObservation observation = PolicyObservation::kImage;
  int64_t action_dim = 2;  // PushT: commanded (x, y)
  int64_t step_embed_dim = 128;            // Diffusion Policy's PushT image config
  std::vector<int64_t> down_dims = {256, 512, 1024};
  int64_t kernel_size = 5, n_groups = 8;
  NoiseScheduleOptions noise;              // 100 steps, squared cosine, epsilon
  int64_t inference_steps = 100;           // DDPM over every step (DP) when equal to noise steps, else DDIM
  double crossway_weight = 0.0;            // 0: the plain diffusion policy; Crossway's configs use 0.1
  CrosswayInput crossway_input = CrosswayInput::kUnetMid;  // the paper's variant (C)
  // Auxiliary block-pose loss (issue #32): a linear head (`pose_head`) on each frame's readout
  // feature regresses that frame's block pose (x, y normalised as the agent position is, cos θ,
  // sin θ), weighted into the loss; the demonstrations' states supervise it, acting never reads
  // it. 0: off (the plain policy). policy/block_pose_fit.h measured why: trained for it, the
  // encoder locates the block ~3x more precisely than the diffusion loss alone makes it.
  double pose_weight = 0.0;
  // What the U-Net sees of each frame (observation_readout.h). The struct's defaults build the
  // original network (class token, no shift); `policy train`'s defaults are in policy_defaults().
  ObservationReadoutOptions readout;
  // Diffusion Policy's random crop as a shift: in training each frame moves by up to +-obs_shift
  // pixels of the encoder's input (edge padding); evaluation sees it unshifted (the centre crop).
  int64_t obs_shift = 0;
};

// Normalisation constants fitted on the demonstrations (DP's LinearNormalizer, limits mode).
struct PolicyNormalizers {
  ActionNormalizer action, agent_pos;
};

struct PolicyLoss {
  at::Tensor total, diffusion, reconstruction;  // reconstruction: undefined without Crossway
  at::Tensor pose;                              // weighted block-pose loss: undefined without pose_weight
};

class DiffusionPolicy : public torch::nn::Module {
 public:
  explicit DiffusionPolicy(DiffusionPolicyConfig config);

  // Fits the action / agent-position normalisers (stored as buffers: checkpoints carry them).
  void set_normalizers(const PolicyNormalizers& normalizers);
  bool has_normalizers() const;

  // DP's compute_loss: epsilon-prediction MSE at uniform random timesteps (+ Crossway's weighted
  // image reconstruction, + the weighted block-pose loss). images [B, To, 3, S, S] in [0, 1],
  // agent_pos [B, To, 2], actions [B, pred_horizon, action_dim] in workspace units; block_pose
  // [B, >= To, 4] (x, y in workspace units, cos θ, sin θ), needed only with pose_weight.
  PolicyLoss compute_loss(const at::Tensor& images, const at::Tensor& agent_pos, const at::Tensor& actions,
                          at::Generator& generator, const at::Tensor& block_pose = {});
  // DP's predict_action: sampling from Gaussian noise with the configured scheduler ->
  // actions to execute [B, action_horizon, action_dim] in workspace units.
  at::Tensor predict_action(const at::Tensor& images, const at::Tensor& agent_pos, at::Generator& generator);

  // The image probe's pieces (pipelines/policy_probe.h). Per-window epsilon MSE [B] with the
  // given noise [B, pred_horizon, action_dim] and timesteps [B] (no shift: the evaluation view).
  at::Tensor denoising_error(const at::Tensor& images, const at::Tensor& agent_pos, const at::Tensor& actions,
                             const at::Tensor& noise, const at::Tensor& timesteps);
  // What the readout gives the U-Net per frame: images [B, To, 3, S, S] -> [B, To, feature_dim()].
  at::Tensor observation_features(const at::Tensor& images);
  // The encoder's patch tokens after its final norm, before the readout: [B, To, 3, S, S] ->
  // [B, To, patches * width] (the block-pose probe of an encoder whose readout is untrained).
  at::Tensor patch_token_features(const at::Tensor& images);
  int64_t feature_dim() const;

  // The encoder's input side S (0 without an encoder) and its attention GFLOPs per image.
  bool has_encoder() const { return encoder_ != nullptr; }
  int64_t lowdim_dim() const { return policy::lowdim_dim(config_.observation); }
  int64_t image_size() const;
  double encoder_attention_gflops() const;
  const DiffusionPolicyConfig& config() const { return config_; }
  models::VisionTransformer& encoder() { return *encoder_; }
  // --freeze_encoder: the encoder's parameters stop requiring gradients and the encoder stays in
  // eval mode (BatchNorm statistics fixed) whatever train() sets. UsageError without an encoder.
  void freeze_encoder();
  bool encoder_frozen() const { return encoder_frozen_; }
  void train(bool on = true) override;

 private:
  // [B, To, ...] observations -> global_cond [B, To * (D + lowdim)] (and the encoder's view of
  // the images, [B * To, 3, S, S] in [-1, 1], Crossway's reconstruction target).
  // `shift_generator`: draws the training shift (null: no shift); `features`: the readout's
  // [B * To, D] when set.
  at::Tensor global_condition(const at::Tensor& images, const at::Tensor& agent_pos, at::Tensor* encoder_images,
                              at::Generator* shift_generator = nullptr, at::Tensor* features = nullptr);
  // pose_weight * MSE of pose_head(features [B * To, D]) against block_pose [B, >= To, 4].
  at::Tensor pose_loss(const at::Tensor& features, const at::Tensor& block_pose);
  // [B, To, 3, S, S] in [0, 1] -> the encoder's input [B * To, 3, S, S] in [-1, 1] (shifted
  // when a generator is given and obs_shift > 0), checked against the encoder's size.
  at::Tensor encoder_input(const at::Tensor& images, at::Generator* shift_generator);
  at::Tensor encode(const at::Tensor& encoder_images);  // [N, 3, S, S] -> [N, feature_dim()]
  ActionNormalizer action_normalizer() const;
  ActionNormalizer agent_pos_normalizer() const;

  DiffusionPolicyConfig config_;
  std::shared_ptr<models::VisionTransformer> encoder_;
  std::shared_ptr<ConditionalUnet1D> unet_;
  std::shared_ptr<PatchReadout> readout_;     // null: the class token (or --global_pool's mean)
  std::shared_ptr<CrosswayDecoder> decoder_;  // null without Crossway
  torch::nn::Linear pose_head_{nullptr};      // null without pose_weight
  DDPMScheduler ddpm_;
  DDIMScheduler ddim_;
  // Normaliser buffers (scale, offset) so that a checkpoint restores them with the weights.
  at::Tensor action_scale_, action_offset_, agent_pos_scale_, agent_pos_offset_;
  bool encoder_frozen_ = false;
};

// Each frame of x [N, C, S, S] moved by a random integer (dy, dx) in [-shift, shift]^2, the
// border repeated (DrQ's random shift; Diffusion Policy's random crop keeps the frame's size).
at::Tensor random_shift(const at::Tensor& x, int64_t shift, at::Generator& generator);

// "256,512,1024" -> {256, 512, 1024}; UsageError naming `flag` otherwise.
std::vector<int64_t> parse_dims(const std::string& text, const std::string& flag);

}  // namespace sparsevit::policy
