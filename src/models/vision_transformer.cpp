#include "models/vision_transformer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>

#include "attention/vit_attention.h"
#include "models/conv_stem.h"
#include "patterns/pattern_stats.h"
#include "util/did_you_mean.h"
#include "util/errors.h"
#include "util/linear.h"
#include "models/weight_init.h"

namespace sparsevit::models {

at::Tensor drop_path(const at::Tensor& x, double drop_prob, bool training) {
  if (drop_prob <= 0.0 || !training) return x;
  const double keep = 1.0 - drop_prob;
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = x.size(0);
  const at::Tensor mask = at::empty(shape, x.options()).bernoulli_(keep);
  return x * mask / keep;
}

const std::string& check_stem(const std::string& stem) {
  for (const auto& name : stem_names())
    if (name == stem) return name;
  throw UsageError(unknown_name_message("stem", stem, stem_names()));
}

PatchEmbed::PatchEmbed(int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t embed_dim, const std::string& stem)
    : img_size_(img_size), in_chans_(in_chans), stem_(check_stem(stem)) {
  if (patch_size < 1 || img_size % patch_size != 0)
    throw UsageError("image size " + std::to_string(img_size) + " is not a multiple of the patch size " +
                     std::to_string(patch_size));
  if (stem_ == "conv") {
    backbone_ = register_module("backbone", std::make_shared<ConvStem>(in_chans, patch_size, embed_dim));
  } else {
    proj_ = register_module(
        "proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_chans, embed_dim, patch_size).stride(patch_size)));
  }
}

at::Tensor PatchEmbed::forward(const at::Tensor& x) {
  if (x.dim() != 4 || x.size(1) != in_chans_ || x.size(2) != img_size_ || x.size(3) != img_size_)
    throw UsageError("model expects images [B, " + std::to_string(in_chans_) + ", " + std::to_string(img_size_) + ", " +
                     std::to_string(img_size_) + "], got " + c10::str(x.sizes()));
  return (backbone_ ? backbone_->forward(x) : proj_->forward(x)).flatten(2).transpose(1, 2);
}

Mlp::Mlp(int64_t dim, int64_t hidden, double drop) : drop_(drop) {
  fc1_ = register_module("fc1", torch::nn::Linear(dim, hidden));
  fc2_ = register_module("fc2", torch::nn::Linear(hidden, dim));
}

at::Tensor Mlp::forward(const at::Tensor& x) {
  namespace F = torch::nn::functional;
  at::Tensor h = F::dropout(at::gelu(linear(fc1_, x)), F::DropoutFuncOptions().p(drop_).training(is_training()));
  return F::dropout(linear(fc2_, h), F::DropoutFuncOptions().p(drop_).training(is_training()));
}

Block::Block(const VitConfig& c, double drop_path_prob, std::shared_ptr<attention::AttentionModule> attn)
    : drop_path_(drop_path_prob) {
  norm1_ = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.embed_dim}).eps(1e-6)));
  attn_ = register_module("attn", std::move(attn));
  norm2_ = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.embed_dim}).eps(1e-6)));
  mlp_ = register_module("mlp", std::make_shared<Mlp>(c.embed_dim, static_cast<int64_t>(c.embed_dim * c.mlp_ratio),
                                                      c.drop_rate));
}

at::Tensor Block::forward(const at::Tensor& x) {
  at::Tensor y = x + drop_path(attn_->forward(norm1_->forward(x)), drop_path_, is_training());
  return y + drop_path(mlp_->forward(norm2_->forward(y)), drop_path_, is_training());
}

std::vector<std::shared_ptr<Block>> make_blocks(const VitConfig& c, const AttentionGeometry& geometry,
                                               std::vector<std::optional<patterns::Pattern>> patterns,
                                               torch::nn::ModuleListImpl& list,
                                               std::shared_ptr<attention::SharedAttentionParameters> shared) {
  if (static_cast<int64_t>(patterns.size()) != c.depth)
    throw UsageError("need one pattern per block: " + std::to_string(patterns.size()) + " for depth " +
                     std::to_string(c.depth));
  attention::LayerOptions options;
  options.geometry = geometry;
  options.qkv_bias = c.qkv_bias;
  options.proj_drop = c.drop_rate;
  options.shared = std::move(shared);
  std::vector<std::shared_ptr<Block>> blocks;
  for (int64_t i = 0; i < c.depth; ++i) {
    options.layer = i;
    // Stochastic depth grows linearly with depth, as in timm.
    const double dpr = c.depth > 1 ? c.drop_path_rate * i / (c.depth - 1) : c.drop_path_rate;
    auto attn = attention::make_attention(c.attention, options, std::move(patterns[i]));
    blocks.push_back(std::make_shared<Block>(c, dpr, attn));
    list.push_back(blocks.back());
  }
  return blocks;
}

VisionTransformer::VisionTransformer(const VitConfig& c,
                                     std::optional<std::vector<std::optional<patterns::Pattern>>> layer_patterns)
    : config_(c) {
  if (c.num_heads < 1 || c.embed_dim % c.num_heads != 0)
    throw UsageError("embed_dim " + std::to_string(c.embed_dim) + " is not divisible by num_heads " +
                     std::to_string(c.num_heads));
  // The embedding prepends exactly one class token and the head reads it.
  if (c.num_prefix_tokens != 1)
    throw UsageError("the ViT supports exactly one prefix token (the class token), got " +
                     std::to_string(c.num_prefix_tokens));
  const AttentionGeometry geometry = c.attention_geometry();
  patch_embed_ = register_module("patch_embed", std::make_shared<PatchEmbed>(c.img_size, c.patch_size, c.in_chans, c.embed_dim, c.stem));
  cls_token_ = register_parameter("cls_token", at::zeros({1, c.num_prefix_tokens, c.embed_dim}));
  pos_embed_ = register_parameter("pos_embed", at::zeros({1, geometry.num_tokens, c.embed_dim}));

  auto patterns = layer_patterns ? std::move(*layer_patterns) : config::build_layer_patterns(c.attention, geometry);
  block_list_ = register_module("blocks", torch::nn::ModuleList());
  attn_shared_ = std::make_shared<attention::SharedAttentionParameters>();
  blocks_ = make_blocks(c, geometry, std::move(patterns), *block_list_, attn_shared_);
  // Only models whose backend shares something carry the holder (others' state dicts are unchanged).
  if (!attn_shared_->empty()) register_module("attn_shared", attn_shared_);
  const auto norm_options = torch::nn::LayerNormOptions({c.embed_dim}).eps(1e-6);
  if (c.global_pool) {
    fc_norm_ = register_module("fc_norm", torch::nn::LayerNorm(norm_options));
  } else {
    norm_ = register_module("norm", torch::nn::LayerNorm(norm_options));
  }
  // num_classes 0: a feature extractor (timm's nn.Identity head), e.g. the policy's encoder.
  if (c.num_classes > 0) head_ = register_module("head", torch::nn::Linear(c.embed_dim, c.num_classes));
  init_weights();
}

void VisionTransformer::init_weights() {
  torch::NoGradGuard no_grad;
  trunc_normal(pos_embed_, 0.02);
  cls_token_.normal_(0.0, 1e-6);
  init_linear_and_norm(*this);
}

at::Tensor VisionTransformer::embed(const at::Tensor& x) {
  const at::Tensor tokens = patch_embed_->forward(x);
  return at::cat({cls_token_.expand({tokens.size(0), -1, -1}), tokens}, 1) + pos_embed_;
}

at::Tensor VisionTransformer::forward_features(const at::Tensor& x) {
  at::Tensor tokens = embed(x);
  for (const auto& block : blocks_) tokens = block->forward(tokens);
  return config_.global_pool ? tokens : norm_->forward(tokens);
}

std::vector<at::Tensor> VisionTransformer::attention_inputs(const at::Tensor& x) {
  std::vector<at::Tensor> inputs;
  at::Tensor tokens = embed(x);
  for (const auto& block : blocks_) {
    inputs.push_back(block->attention_input(tokens));
    tokens = block->forward(tokens);
  }
  return inputs;
}

at::Tensor VisionTransformer::forward_head(const at::Tensor& features, bool pre_logits) {
  const at::Tensor pooled =
      config_.global_pool
          ? fc_norm_->forward(features.narrow(1, config_.num_prefix_tokens, features.size(1) - config_.num_prefix_tokens).mean(1))
          : features.select(1, 0);  // class token
  return pre_logits || !head_ ? pooled : linear(head_, pooled);
}

std::vector<std::optional<patterns::Pattern>> VisionTransformer::layer_patterns() const {
  std::vector<std::optional<patterns::Pattern>> out;
  for (const auto& b : blocks_) out.push_back(b->attn().static_pattern());
  return out;
}

void VisionTransformer::set_training_progress(double progress) {
  for (const auto& b : blocks_) b->attn().set_progress(progress);
}

std::string VisionTransformer::kernel_name() const { return blocks_.front()->attn().kernel_name(); }

double VisionTransformer::attention_gflops_now() const {
  double pairs = 0;
  for (const auto& b : blocks_) pairs += b->attn().computed_pairs_per_head(config_.num_tokens());
  return static_cast<double>(config_.num_heads) * patterns::attention_gflops_for_pairs(pairs, config_.head_dim());
}

}  // namespace sparsevit::models
