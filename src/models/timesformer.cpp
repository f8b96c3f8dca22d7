#include "models/timesformer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/dropout.h>

#include "attention/attention.h"
#include "models/weight_init.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"
#include "util/linear.h"

namespace sparsevit::models {
namespace {

torch::nn::LayerNorm layer_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6));
}

at::Tensor token_dropout(const at::Tensor& x, double p, bool training) {
  namespace F = torch::nn::functional;
  return F::dropout(x, F::DropoutFuncOptions().p(p).training(training));
}

}  // namespace

// ---------------------------------------------------------------- DividedSpaceTimeBlock

DividedSpaceTimeBlock::DividedSpaceTimeBlock(const VitConfig& c, double drop_path_prob,
                                             std::shared_ptr<attention::AttentionModule> attn,
                                             std::shared_ptr<attention::AttentionModule> temporal_attn)
    : drop_path_(drop_path_prob) {
  // TimeSformer's registration order (its state dicts list them so).
  norm1_ = register_module("norm1", layer_norm(c.embed_dim));
  attn_ = register_module("attn", std::move(attn));
  temporal_norm1_ = register_module("temporal_norm1", layer_norm(c.embed_dim));
  temporal_attn_ = register_module("temporal_attn", std::move(temporal_attn));
  temporal_fc_ = register_module("temporal_fc", torch::nn::Linear(c.embed_dim, c.embed_dim));
  norm2_ = register_module("norm2", layer_norm(c.embed_dim));
  mlp_ = register_module("mlp", std::make_shared<Mlp>(c.embed_dim, static_cast<int64_t>(c.embed_dim * c.mlp_ratio),
                                                      c.drop_rate));
}

at::Tensor DividedSpaceTimeBlock::temporal_update(const at::Tensor& x, int64_t num_frames) {
  const int64_t batch = x.size(0), dim = x.size(2), patches = (x.size(1) - 1) / num_frames;
  const at::Tensor xp = x.narrow(1, 1, patches * num_frames);
  // 'b (h w t) m -> (b h w) t m': patch-major order makes this a view.
  const at::Tensor xt = xp.reshape({batch * patches, num_frames, dim});
  // drop_path per (clip, patch) row, as TimeSformer applies it to the [(b h w), t, m] tensor.
  const at::Tensor res = drop_path(temporal_attn_->forward(temporal_norm1_->forward(xt)), drop_path_, is_training());
  return xp + linear(temporal_fc_, res.reshape({batch, patches * num_frames, dim}));
}

at::Tensor DividedSpaceTimeBlock::to_frames(const at::Tensor& patches, const at::Tensor& cls, int64_t num_frames) {
  const int64_t batch = patches.size(0), dim = patches.size(2), p = patches.size(1) / num_frames;
  // 'b (h w t) m -> (b t) (h w) m', and the class token repeated into every frame.
  const at::Tensor frames = patches.view({batch, p, num_frames, dim}).transpose(1, 2).reshape({batch * num_frames, p, dim});
  const at::Tensor cls_per_frame = cls.expand({batch, num_frames, dim}).reshape({batch * num_frames, 1, dim});
  return at::cat({cls_per_frame, frames}, 1);
}

at::Tensor DividedSpaceTimeBlock::spatial_attention_input(const at::Tensor& x, int64_t num_frames) {
  return norm1_->forward(to_frames(temporal_update(x, num_frames), x.narrow(1, 0, 1), num_frames));
}

at::Tensor DividedSpaceTimeBlock::forward(const at::Tensor& x, int64_t num_frames) {
  const int64_t batch = x.size(0), dim = x.size(2), patches = (x.size(1) - 1) / num_frames;
  const at::Tensor init_cls = x.narrow(1, 0, 1);
  const at::Tensor xt = temporal_update(x, num_frames);
  // Spatial attention over each frame's P + 1 tokens.
  const at::Tensor res = drop_path(attn_->forward(norm1_->forward(to_frames(xt, init_cls, num_frames))), drop_path_,
                                   is_training());
  // The class token's update is the mean of its per-frame updates.
  const at::Tensor cls_res = res.select(1, 0).reshape({batch, num_frames, dim}).mean(1, /*keepdim=*/true);
  const at::Tensor patch_res = res.narrow(1, 1, patches)
                                   .reshape({batch, num_frames, patches, dim})
                                   .transpose(1, 2)
                                   .reshape({batch, patches * num_frames, dim});
  const at::Tensor y = at::cat({init_cls, xt}, 1) + at::cat({cls_res, patch_res}, 1);
  return y + drop_path(mlp_->forward(norm2_->forward(y)), drop_path_, is_training());
}

// ---------------------------------------------------------------- TimeSformer

TimeSformer::TimeSformer(const TimeSformerConfig& c) : config_(c), layout_(c.layout()) {
  const VitConfig& v = c.vit;
  if (v.num_heads < 1 || v.embed_dim % v.num_heads != 0)
    throw UsageError("embed_dim " + std::to_string(v.embed_dim) + " is not divisible by num_heads " +
                     std::to_string(v.num_heads));
  if (v.num_prefix_tokens != 1) throw UsageError("the TimeSformer has exactly one prefix token (the class token)");
  if (v.global_pool) throw UsageError("the TimeSformer classifies its class token (--global_pool is for image models)");
  const bool divided = c.attention_type == VideoAttentionType::kDividedSpaceTime;
  if (!divided && (c.temporal_attention.has_mask() || c.temporal_attention.backend != "vit"))
    throw UsageError("a temporal attention config needs attention type divided_space_time, not " +
                     video_attention_name(c.attention_type));

  patch_embed_ = register_module("patch_embed", std::make_shared<PatchEmbed>(v.img_size, v.patch_size, v.in_chans, v.embed_dim, v.stem));
  cls_token_ = register_parameter("cls_token", at::zeros({1, 1, v.embed_dim}));
  pos_embed_ = register_parameter("pos_embed", at::zeros({1, v.num_tokens(), v.embed_dim}));
  if (c.attention_type != VideoAttentionType::kSpaceOnly)
    time_embed_ = register_parameter("time_embed", at::zeros({1, c.num_frames, v.embed_dim}));

  block_list_ = register_module("blocks", torch::nn::ModuleList());
  attn_shared_ = std::make_shared<attention::SharedAttentionParameters>();
  auto spatial_patterns = config::build_layer_patterns(v.attention, layout_.spatial);
  if (divided) {
    auto temporal_patterns = config::build_layer_patterns(c.temporal_attention, *layout_.temporal);
    attention::LayerOptions spatial_options, temporal_options;
    spatial_options.geometry = layout_.spatial;
    temporal_options.geometry = *layout_.temporal;
    for (attention::LayerOptions* o : {&spatial_options, &temporal_options}) {
      o->qkv_bias = v.qkv_bias;
      o->proj_drop = v.drop_rate;
      o->shared = attn_shared_;
    }
    for (int64_t i = 0; i < v.depth; ++i) {
      spatial_options.layer = temporal_options.layer = i;
      const double dpr = v.depth > 1 ? v.drop_path_rate * i / (v.depth - 1) : v.drop_path_rate;
      auto block = std::make_shared<DividedSpaceTimeBlock>(
          v, dpr, attention::make_attention(v.attention, spatial_options, std::move(spatial_patterns[i])),
          attention::make_attention(c.temporal_attention, temporal_options, std::move(temporal_patterns[i])));
      divided_blocks_.push_back(block);
      block_list_->push_back(block);
    }
  } else {
    blocks_ = make_blocks(v, layout_.spatial, std::move(spatial_patterns), *block_list_, attn_shared_);
  }
  if (!attn_shared_->empty()) register_module("attn_shared", attn_shared_);
  norm_ = register_module("norm", layer_norm(v.embed_dim));
  head_ = register_module("head", torch::nn::Linear(v.embed_dim, v.num_classes));

  // TimeSformer's init: trunc_normal(.02) for pos_embed, cls_token and Linear weights, LayerNorm
  // 1 / 0, time_embed zero, and every temporal_fc zero (weights and bias).
  init_linear_and_norm(*this);
  trunc_normal(pos_embed_, 0.02);
  trunc_normal(cls_token_, 0.02);
  torch::NoGradGuard no_grad;
  for (const auto& p : named_parameters())
    if (p.key().find("temporal_fc.") != std::string::npos) p.value().zero_();
}

at::Tensor TimeSformer::embed(const at::Tensor& x) {
  const VitConfig& v = config_.vit;
  const int64_t t = config_.num_frames;
  if (x.dim() != 5 || x.size(1) != v.in_chans || x.size(2) != t || x.size(3) != v.img_size || x.size(4) != v.img_size)
    throw UsageError("model expects clips [B, " + std::to_string(v.in_chans) + ", " + std::to_string(t) + ", " +
                     std::to_string(v.img_size) + ", " + std::to_string(v.img_size) + "], got " + c10::str(x.sizes()));
  const int64_t batch = x.size(0), dim = v.embed_dim, p = v.num_patches();
  // '(b t) c h w' frames through the patch embedding, class token and position embedding per frame.
  const at::Tensor frames = x.transpose(1, 2).reshape({batch * t, v.in_chans, v.img_size, v.img_size});
  const at::Tensor patches = patch_embed_->forward(frames);
  at::Tensor tokens = at::cat({cls_token_.expand({batch * t, -1, -1}), patches}, 1) + pos_embed_;
  tokens = token_dropout(tokens, v.drop_rate, is_training());
  if (config_.attention_type == VideoAttentionType::kSpaceOnly) return tokens;  // [B * T, P + 1, C]
  // TimeSformer keeps the class token of the first frames (all frames' are equal) and adds
  // time_embed to '(b n) t m'.
  const at::Tensor cls = tokens.narrow(0, 0, batch).narrow(1, 0, 1);
  at::Tensor per_patch = tokens.narrow(1, 1, p).reshape({batch, t, p, dim}).transpose(1, 2);  // [B, P, T, C]
  per_patch = token_dropout(per_patch + time_embed_.unsqueeze(1), v.drop_rate, is_training());
  return at::cat({cls, per_patch.reshape({batch, p * t, dim})}, 1);  // [B, 1 + P * T, C]
}

at::Tensor TimeSformer::run_blocks(at::Tensor tokens, int64_t batch) {
  for (const auto& block : divided_blocks_) tokens = block->forward(tokens, config_.num_frames);
  for (const auto& block : blocks_) tokens = block->forward(tokens);
  if (config_.attention_type == VideoAttentionType::kSpaceOnly)  // average the frames
    tokens = tokens.reshape({batch, config_.num_frames, tokens.size(1), tokens.size(2)}).mean(1);
  return tokens;
}

at::Tensor TimeSformer::forward_features(const at::Tensor& x) {
  return norm_->forward(run_blocks(embed(x), x.size(0)).select(1, 0));
}

at::Tensor TimeSformer::forward(const at::Tensor& x) { return linear(head_, forward_features(x)); }

std::vector<at::Tensor> TimeSformer::frame_attention_inputs(const at::Tensor& x, int64_t frame) {
  const int64_t t = config_.num_frames, batch = x.size(0);
  if (frame < 0 || frame >= t)
    throw UsageError("--frame " + std::to_string(frame) + " is outside the clip's " + std::to_string(t) + " frames");
  if (config_.attention_type == VideoAttentionType::kJointSpaceTime)
    throw UsageError("attention maps on one frame need spatial attention (divided_space_time or space_only), "
                     "not joint_space_time");
  std::vector<at::Tensor> inputs;
  at::Tensor tokens = embed(x);
  auto pick_frame = [&](const at::Tensor& frames) {  // [B * T, N, C] -> frame `frame` of each clip
    return frames.reshape({batch, t, frames.size(1), frames.size(2)}).select(1, frame);
  };
  for (const auto& block : divided_blocks_) {
    inputs.push_back(pick_frame(block->spatial_attention_input(tokens, t)));
    tokens = block->forward(tokens, t);
  }
  for (const auto& block : blocks_) {
    inputs.push_back(pick_frame(block->attention_input(tokens)));
    tokens = block->forward(tokens);
  }
  return inputs;
}

std::vector<attention::AttentionModule*> TimeSformer::spatial_attention() const {
  std::vector<attention::AttentionModule*> out;
  for (const auto& b : divided_blocks_) out.push_back(&b->attn());
  for (const auto& b : blocks_) out.push_back(&b->attn());
  return out;
}

std::vector<std::optional<patterns::Pattern>> TimeSformer::layer_patterns() const {
  std::vector<std::optional<patterns::Pattern>> out;
  for (auto* a : spatial_attention()) out.push_back(a->static_pattern());
  return out;
}

std::vector<std::optional<patterns::Pattern>> TimeSformer::temporal_layer_patterns() const {
  std::vector<std::optional<patterns::Pattern>> out;
  for (const auto& b : divided_blocks_) out.push_back(b->temporal_attn().static_pattern());
  return out;
}

void TimeSformer::set_training_progress(double progress) {
  for (auto* a : spatial_attention()) a->set_progress(progress);
  for (const auto& b : divided_blocks_) b->temporal_attn().set_progress(progress);
}

double TimeSformer::attention_gflops_now() const {
  const int64_t heads = config_.vit.num_heads, head_dim = config_.vit.head_dim();
  double gflops = 0;
  for (auto* a : spatial_attention())
    gflops += layout_.spatial_sequences * heads *
              patterns::attention_gflops_for_pairs(a->computed_pairs_per_head(layout_.spatial.num_tokens), head_dim);
  for (const auto& b : divided_blocks_)
    gflops += layout_.temporal_sequences * heads *
              patterns::attention_gflops_for_pairs(b->temporal_attn().computed_pairs_per_head(config_.num_frames), head_dim);
  return gflops;
}

std::string TimeSformer::kernel_name() const { return spatial_attention().front()->kernel_name(); }

}  // namespace sparsevit::models
