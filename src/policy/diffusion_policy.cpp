#include "policy/diffusion_policy.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "models/vision_transformer.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

models::ModelOptions encoder_options(const DiffusionPolicyConfig& c) {
  models::ModelOptions o = c.encoder;
  o.num_classes = 0;  // features: the class token (or the pooled patches), no head
  o.in_chans = 3;
  return o;
}

models::VitConfig encoder_config(const DiffusionPolicyConfig& c) {
  return models::vit_config(models::find_model_shape(c.encoder_model), encoder_options(c));
}

void check_config(const DiffusionPolicyConfig& c) {
  if (c.obs_horizon < 1) throw UsageError("obs_horizon must be >= 1");
  if (c.action_horizon < 1 || c.obs_horizon - 1 + c.action_horizon > c.pred_horizon)
    throw UsageError("the executed actions (obs_horizon - 1 + action_horizon = " +
                     std::to_string(c.obs_horizon - 1 + c.action_horizon) + ") must fit in pred_horizon " +
                     std::to_string(c.pred_horizon));
  const int64_t factor = int64_t{1} << (c.down_dims.size() - 1);
  if (c.down_dims.empty() || c.pred_horizon % factor != 0)
    throw UsageError("pred_horizon " + std::to_string(c.pred_horizon) + " must be a multiple of 2^(levels - 1) = " +
                     std::to_string(factor) + " for down_dims of " + std::to_string(c.down_dims.size()) + " levels");
  if (c.inference_steps < 1 || c.inference_steps > c.noise.num_train_timesteps)
    throw UsageError("inference_steps must be in [1, " + std::to_string(c.noise.num_train_timesteps) + "]");
  if (c.crossway_weight < 0) throw UsageError("crossway_weight must be >= 0");
  if (c.pose_weight < 0) throw UsageError("pose_weight must be >= 0");
  if (c.pose_weight > 0 && c.observation != PolicyObservation::kImage)
    throw UsageError("the block-pose loss trains an image encoder: a low-dim policy reads the pose itself (--pose_weight 0)");
  if (c.obs_shift < 0) throw UsageError("obs_shift must be >= 0");
  if (c.readout.kind != ObservationReadout::kClassToken && c.encoder.global_pool)
    throw UsageError("--global_pool is a class-token readout option; --obs_readout " +
                     observation_readout_name(c.readout.kind) + " reads the patch tokens");
}

}  // namespace

std::vector<int64_t> parse_dims(const std::string& text, const std::string& flag) {
  std::vector<int64_t> dims;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1 || v > 65536)
      throw UsageError("--" + flag + " must be comma-separated positive integers (e.g. 256,512,1024), got '" + text + "'");
    dims.push_back(v);
  }
  if (dims.empty()) throw UsageError("--" + flag + " is empty");
  return dims;
}

DiffusionPolicy::DiffusionPolicy(DiffusionPolicyConfig config)
    : config_(std::move(config)), ddpm_(config_.noise), ddim_(config_.noise) {
  check_config(config_);
  const bool image = config_.observation == PolicyObservation::kImage;
  if (image)
    encoder_ = register_module("obs_encoder", models::create_model(config_.encoder_model, encoder_options(config_)));
  const models::VitConfig vc = image ? encoder_config(config_) : models::VitConfig{};
  if (image && config_.readout.kind != ObservationReadout::kClassToken) {
    const int64_t grid = vc.img_size / vc.patch_size;
    readout_ = register_module("obs_readout",
                               std::make_shared<PatchReadout>(config_.readout, vc.embed_dim, grid, grid, vc.num_heads));
  }
  const int64_t cond = config_.obs_horizon * (feature_dim() + lowdim_dim());
  unet_ = register_module("model", std::make_shared<ConditionalUnet1D>(config_.action_dim, cond, config_.step_embed_dim,
                                                                      config_.down_dims, config_.kernel_size,
                                                                      config_.n_groups));
  if (config_.crossway_weight > 0) {
    if (!image) throw UsageError("Crossway reconstructs images: a low-dim policy has none (--crossway_weight 0)");
    CrosswayDecoderOptions d;
    d.input = config_.crossway_input;
    d.feature_dim = d.input == CrosswayInput::kUnetMid ? unet_->mid_dim() : cond;
    // The original's rule for the mid features (its constructor asserts it): each grid pixel
    // keeps its share of the mid channels, {16, 32} at policy-demo's U-Net instead of the
    // paper-sized {128, 256} that made a step cost 3x a plain one.
    // Tiny U-Nets (tests) round up to whole GroupNorm groups.
    if (d.input == CrosswayInput::kUnetMid) {
      d.decode_dims = crossway_decode_dims_for_unet(unet_->mid_dim(), config_.obs_horizon, d.decode_resolution);
      for (int64_t& dim : d.decode_dims) dim = (std::max(dim, d.n_groups) + d.n_groups - 1) / d.n_groups * d.n_groups;
    }
    d.n_obs_steps = config_.obs_horizon;
    d.image_height = d.image_width = image_size();
    d.n_groups = config_.n_groups;
    d.loss_weight = config_.crossway_weight;
    if (d.input == CrosswayInput::kUnetMid &&
        unet_->mid_horizon(config_.pred_horizon) != d.decode_resolution * d.decode_resolution)
      throw UsageError("Crossway decodes the U-Net's mid features as a " + std::to_string(d.decode_resolution) + "x" +
                       std::to_string(d.decode_resolution) + " grid: pred_horizon / 2^(levels - 1) must be " +
                       std::to_string(d.decode_resolution * d.decode_resolution) + ", got " +
                       std::to_string(unet_->mid_horizon(config_.pred_horizon)));
    decoder_ = register_module("decoder", std::make_shared<CrosswayDecoder>(d));
  }
  if (config_.pose_weight > 0) pose_head_ = register_module("pose_head", torch::nn::Linear(feature_dim(), kBlockPoseDim));
  ddim_.set_timesteps(config_.inference_steps);
  auto ones = [](int64_t n) { return at::ones({n}, at::kFloat); };
  auto zeros = [](int64_t n) { return at::zeros({n}, at::kFloat); };
  action_scale_ = register_buffer("action_scale", ones(config_.action_dim));
  action_offset_ = register_buffer("action_offset", zeros(config_.action_dim));
  // Named agent_pos_* for the checkpoints written before low-dim policies; they normalise the
  // whole low-dim vector.
  agent_pos_scale_ = register_buffer("agent_pos_scale", ones(lowdim_dim()));
  agent_pos_offset_ = register_buffer("agent_pos_offset", zeros(lowdim_dim()));
}

void DiffusionPolicy::set_normalizers(const PolicyNormalizers& n) {
  at::NoGradGuard no_grad;
  if (n.action.dim() != config_.action_dim || n.agent_pos.dim() != lowdim_dim())
    throw UsageError("normalizers of dimensions " + std::to_string(n.action.dim()) + " / " +
                     std::to_string(n.agent_pos.dim()) + " for a policy of " + std::to_string(config_.action_dim) +
                     " / " + std::to_string(lowdim_dim()));
  action_scale_.copy_(n.action.scale());
  action_offset_.copy_(n.action.offset());
  agent_pos_scale_.copy_(n.agent_pos.scale());
  agent_pos_offset_.copy_(n.agent_pos.offset());
}

bool DiffusionPolicy::has_normalizers() const {
  return !(action_scale_.eq(1).all().item<bool>() && action_offset_.eq(0).all().item<bool>());
}

ActionNormalizer DiffusionPolicy::action_normalizer() const { return ActionNormalizer(action_scale_, action_offset_); }
ActionNormalizer DiffusionPolicy::agent_pos_normalizer() const {
  return ActionNormalizer(agent_pos_scale_, agent_pos_offset_);
}

int64_t DiffusionPolicy::image_size() const { return encoder_ ? encoder_->config().img_size : 0; }

double DiffusionPolicy::encoder_attention_gflops() const { return encoder_ ? encoder_->attention_gflops_now() : 0.0; }

void DiffusionPolicy::freeze_encoder() {
  if (!encoder_) throw UsageError("--freeze_encoder: a low-dim policy has no encoder");
  for (auto& p : encoder_->parameters()) p.set_requires_grad(false);
  encoder_frozen_ = true;
  encoder_->eval();
}

void DiffusionPolicy::train(bool on) {
  torch::nn::Module::train(on);
  if (encoder_frozen_) encoder_->eval();
}

int64_t DiffusionPolicy::feature_dim() const {
  if (!encoder_) return 0;
  return readout_ ? readout_->feature_dim() : encoder_config(config_).embed_dim;
}

at::Tensor random_shift(const at::Tensor& x, int64_t shift, at::Generator& generator) {
  if (shift <= 0) return x;
  const int64_t n = x.size(0), h = x.size(-2), w = x.size(-1);
  const at::Tensor padded = at::replication_pad2d(x, {shift, shift, shift, shift});
  const at::Tensor offsets = at::randint(0, 2 * shift + 1, {n, 2}, generator, at::TensorOptions(at::kLong));
  const auto o = offsets.accessor<int64_t, 2>();
  std::vector<at::Tensor> frames;
  frames.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) frames.push_back(padded[i].narrow(-2, o[i][0], h).narrow(-1, o[i][1], w));
  return at::stack(frames).contiguous();
}

at::Tensor DiffusionPolicy::encoder_input(const at::Tensor& images, at::Generator* shift_generator) {
  const int64_t to = config_.obs_horizon, s = image_size();
  if (images.dim() != 5 || images.size(1) < to || images.size(2) != 3 || images.size(3) != s || images.size(4) != s)
    throw UsageError("policy images must be [B, >= " + std::to_string(to) + ", 3, " + std::to_string(s) + ", " +
                     std::to_string(s) + "], got " + c10::str(images.sizes()));
  // DP's image range normaliser: [0, 1] -> [-1, 1].
  const at::Tensor x = (images.narrow(1, 0, to).reshape({images.size(0) * to, 3, s, s}) * 2 - 1).contiguous();
  return shift_generator && config_.obs_shift > 0 ? random_shift(x, config_.obs_shift, *shift_generator) : x;
}

at::Tensor DiffusionPolicy::encode(const at::Tensor& x) {
  const at::Tensor tokens = encoder_->forward_features(x);
  if (!readout_) return encoder_->forward_head(tokens, /*pre_logits=*/true);
  const int64_t prefix = encoder_->config().num_prefix_tokens;
  return readout_->forward(tokens.narrow(1, prefix, tokens.size(1) - prefix));
}

at::Tensor DiffusionPolicy::observation_features(const at::Tensor& images) {
  if (!encoder_) throw UsageError("a low-dim policy has no image features");
  return encode(encoder_input(images, nullptr)).reshape({images.size(0), config_.obs_horizon, -1});
}

at::Tensor DiffusionPolicy::patch_token_features(const at::Tensor& images) {
  if (!encoder_) throw UsageError("a low-dim policy has no image features");
  const at::Tensor tokens = encoder_->forward_features(encoder_input(images, nullptr));
  const int64_t prefix = encoder_->config().num_prefix_tokens;
  return tokens.narrow(1, prefix, tokens.size(1) - prefix).reshape({images.size(0), config_.obs_horizon, -1});
}

at::Tensor DiffusionPolicy::global_condition(const at::Tensor& images, const at::Tensor& agent_pos,
                                             at::Tensor* encoder_images, at::Generator* shift_generator,
                                             at::Tensor* features_out) {
  const int64_t b = agent_pos.dim() == 3 ? agent_pos.size(0) : -1, to = config_.obs_horizon;
  if (agent_pos.dim() != 3 || agent_pos.size(1) < to || agent_pos.size(2) != lowdim_dim() ||
      (encoder_ && images.defined() && images.size(0) != b))
    throw UsageError("policy agent_pos must be [B, >= " + std::to_string(to) + ", " + std::to_string(lowdim_dim()) +
                     "], got " + c10::str(agent_pos.sizes()));
  const at::Tensor pos = agent_pos_normalizer().normalize(agent_pos.narrow(1, 0, to).to(at::kFloat));
  if (!encoder_) return pos.reshape({b, -1});
  if (!images.defined()) throw UsageError("an image policy needs images");
  const at::Tensor x = encoder_input(images, shift_generator);
  if (encoder_images) *encoder_images = x;
  const at::Tensor features = encode(x);
  if (features_out) *features_out = features;
  return at::cat({features.reshape({b, to, -1}), pos.to(features.scalar_type())}, -1).reshape({b, -1});
}

at::Tensor DiffusionPolicy::pose_loss(const at::Tensor& features, const at::Tensor& block_pose) {
  const int64_t b = features.size(0) / config_.obs_horizon, to = config_.obs_horizon;
  if (!block_pose.defined() || block_pose.dim() != 3 || block_pose.size(0) != b || block_pose.size(1) < to ||
      block_pose.size(2) != kBlockPoseDim)
    throw UsageError("a policy with pose_weight needs block_pose [B, >= " + std::to_string(to) + ", " +
                     std::to_string(kBlockPoseDim) + "] (x, y, cos, sin), got " + (block_pose.defined() ? c10::str(block_pose.sizes()) : "none"));
  const at::Tensor pose = block_pose.narrow(1, 0, to).to(features.scalar_type());
  // Positions in the agent position's normalised units: the same workspace, so one scale.
  const at::Tensor target = at::cat({agent_pos_normalizer().normalize(pose.narrow(2, 0, 2)), pose.narrow(2, 2, 2)}, 2);
  return config_.pose_weight * at::mse_loss(pose_head_->forward(features), target.reshape({b * to, kBlockPoseDim}));
}

PolicyLoss DiffusionPolicy::compute_loss(const at::Tensor& images, const at::Tensor& agent_pos,
                                         const at::Tensor& actions, at::Generator& generator,
                                         const at::Tensor& block_pose) {
  if (actions.dim() != 3 || actions.size(1) != config_.pred_horizon || actions.size(2) != config_.action_dim)
    throw UsageError("policy actions must be [B, " + std::to_string(config_.pred_horizon) + ", " +
                     std::to_string(config_.action_dim) + "], got " + c10::str(actions.sizes()));
  at::Tensor encoder_images, features;
  // The random shift only while training (DP crops at random in training, at the centre in eval).
  const at::Tensor cond = global_condition(images, agent_pos, decoder_ ? &encoder_images : nullptr,
                                           is_training() ? &generator : nullptr, pose_head_ ? &features : nullptr);
  const at::Tensor trajectory = action_normalizer().normalize(actions.to(at::kFloat));
  const at::Tensor noise = at::randn(trajectory.sizes(), generator, trajectory.options());
  const at::Tensor timesteps = ddpm_.random_timesteps(trajectory.size(0), generator);
  const at::Tensor noisy = ddpm_.add_noise(trajectory, noise, timesteps);
  PolicyLoss loss;
  if (pose_head_) loss.pose = pose_loss(features, block_pose);
  if (!decoder_) {
    loss.diffusion = at::mse_loss(unet_->forward(noisy, timesteps, cond), noise);
    loss.total = loss.pose.defined() ? loss.diffusion + loss.pose : loss.diffusion;
    return loss;
  }
  const UnetOutput out = unet_->forward_with_mid(noisy, timesteps, cond);
  loss.diffusion = at::mse_loss(out.prediction, noise);
  const at::Tensor reconstruction =
      decoder_->forward(config_.crossway_input == CrosswayInput::kUnetMid ? out.mid : cond);
  at::Tensor target = encoder_images;
  if (target.size(-1) != reconstruction.size(-1) || target.size(-2) != reconstruction.size(-2))
    target = at::adaptive_avg_pool2d(target, {reconstruction.size(-2), reconstruction.size(-1)});
  loss.reconstruction = decoder_->loss(reconstruction, target);  // weighted by crossway_weight
  loss.total = loss.diffusion + loss.reconstruction;
  if (loss.pose.defined()) loss.total = loss.total + loss.pose;
  return loss;
}

at::Tensor DiffusionPolicy::denoising_error(const at::Tensor& images, const at::Tensor& agent_pos,
                                            const at::Tensor& actions, const at::Tensor& noise,
                                            const at::Tensor& timesteps) {
  const at::Tensor cond = global_condition(images, agent_pos, nullptr);
  const at::Tensor trajectory = action_normalizer().normalize(actions.to(at::kFloat));
  const at::Tensor noisy = ddpm_.add_noise(trajectory, noise, timesteps);
  return (unet_->forward(noisy, timesteps, cond) - noise).pow(2).mean({1, 2});
}

at::Tensor DiffusionPolicy::predict_action(const at::Tensor& images, const at::Tensor& agent_pos,
                                           at::Generator& generator) {
  at::NoGradGuard no_grad;
  const at::Tensor cond = global_condition(images, agent_pos, nullptr);
  at::Tensor trajectory =
      at::randn({cond.size(0), config_.pred_horizon, config_.action_dim}, generator, cond.options());
  if (config_.inference_steps == config_.noise.num_train_timesteps) {
    for (int64_t t : ddpm_.timesteps())
      trajectory = ddpm_.step(unet_->forward(trajectory, at::full({}, t, at::kLong), cond), t, trajectory, generator);
  } else {
    for (int64_t t : ddim_.timesteps())
      trajectory = ddim_.step(unet_->forward(trajectory, at::full({}, t, at::kLong), cond), t, trajectory);
  }
  const at::Tensor actions = action_normalizer().unnormalize(trajectory.to(at::kFloat));
  return actions.narrow(1, config_.obs_horizon - 1, config_.action_horizon);
}

}  // namespace sparsevit::policy
