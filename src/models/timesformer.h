// TimeSformer (Bertasius et al. 2021, facebookresearch/TimeSformer models/vit.py): a ViT over
// the patches of T frames, with TimeSformer's parameter names and its three attention types
// (models/video_attention_layout.h). In divided space-time attention each block first attends
// over time (the T tokens of one patch position: `temporal_norm1`, `temporal_attn`, then
// `temporal_fc`, zero-initialised so a model initialised from image weights starts as the image
// model), then over space (the P + 1 tokens of one frame, the class token copied into every
// frame and its outputs averaged back), then the MLP.
//
// Tokens after the embedding: [class ; patch 0 frame 0, patch 0 frame 1, ..., patch P-1 frame T-1]
// (TimeSformer's 'b (n t) m': patch-major), with pos_embed per patch and time_embed per frame.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <optional>
#include <vector>

#include "config/attention_spec.h"
#include "models/classifier.h"
#include "models/video_attention_layout.h"
#include "models/vision_transformer.h"

namespace sparsevit::models {

struct TimeSformerConfig {
  VitConfig vit;  // one frame's ViT shape; vit.attention: the spatial attention (the attention config)
  int64_t num_frames = 8;
  VideoAttentionType attention_type = VideoAttentionType::kDividedSpaceTime;
  config::AttentionSpec temporal_attention;  // divided only; default-constructed: dense

  VideoAttentionLayout layout() const { return video_attention_layout(vit.attention_geometry(), num_frames, attention_type); }
};

// TimeSformer's divided space-time Block.
class DividedSpaceTimeBlock : public torch::nn::Module {
 public:
  DividedSpaceTimeBlock(const VitConfig& c, double drop_path, std::shared_ptr<attention::AttentionModule> attn,
                        std::shared_ptr<attention::AttentionModule> temporal_attn);
  // x [B, 1 + P * T, C] in TimeSformer's token order -> the same shape.
  at::Tensor forward(const at::Tensor& x, int64_t num_frames);
  attention::AttentionModule& attn() const { return *attn_; }
  attention::AttentionModule& temporal_attn() const { return *temporal_attn_; }
  // The spatial attention's input for the frames of x: norm1 of [B * T, P + 1, C].
  at::Tensor spatial_attention_input(const at::Tensor& x, int64_t num_frames);

 private:
  // The temporal half: x[:, 1:] plus the temporal residual, [B, P * T, C].
  at::Tensor temporal_update(const at::Tensor& x, int64_t num_frames);
  // [B, P * T, C] patch tokens + class tokens [B, 1, C] -> frames [B * T, P + 1, C].
  static at::Tensor to_frames(const at::Tensor& patches, const at::Tensor& cls, int64_t num_frames);

  torch::nn::LayerNorm norm1_{nullptr}, temporal_norm1_{nullptr}, norm2_{nullptr};
  std::shared_ptr<attention::AttentionModule> attn_, temporal_attn_;
  torch::nn::Linear temporal_fc_{nullptr};
  std::shared_ptr<Mlp> mlp_;
  double drop_path_;
};

class TimeSformer : public Classifier {
 public:
  explicit TimeSformer(const TimeSformerConfig& config);

  at::Tensor forward(const at::Tensor& x) override;  // clips [B, C, T, H, W] -> logits
  at::Tensor forward_features(const at::Tensor& x);  // the class token after `norm`, [B, C]
  // The spatial attention input of every block for one frame of each clip (attention maps):
  // [B, P + 1, C] per block.
  std::vector<at::Tensor> frame_attention_inputs(const at::Tensor& x, int64_t frame);

  const VitConfig& config() const override { return config_.vit; }
  const TimeSformerConfig& video_config() const { return config_; }
  int64_t num_frames() const override { return config_.num_frames; }
  std::vector<std::optional<patterns::Pattern>> layer_patterns() const override;  // spatial
  std::vector<std::optional<patterns::Pattern>> temporal_layer_patterns() const;  // divided only
  void set_training_progress(double progress) override;
  // Per clip: spatial pairs x spatial sequences + temporal pairs x temporal sequences.
  double attention_gflops_now() const override;
  std::string kernel_name() const override;
  // Every block's spatial attention module (analysis on one frame).
  std::vector<attention::AttentionModule*> spatial_attention() const;

 private:
  at::Tensor embed(const at::Tensor& x);  // clips -> tokens as the blocks take them
  at::Tensor run_blocks(at::Tensor tokens, int64_t batch);

  TimeSformerConfig config_;
  VideoAttentionLayout layout_;
  std::shared_ptr<PatchEmbed> patch_embed_;
  at::Tensor cls_token_, pos_embed_, time_embed_;
  std::vector<std::shared_ptr<DividedSpaceTimeBlock>> divided_blocks_;
  std::vector<std::shared_ptr<Block>> blocks_;  // space_only and joint_space_time: ViT blocks
  torch::nn::ModuleList block_list_;
  std::shared_ptr<attention::SharedAttentionParameters> attn_shared_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace sparsevit::models
