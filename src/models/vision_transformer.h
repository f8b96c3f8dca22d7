// Vision Transformer in timm's structure: PatchEmbed -> class token + learned position
// embedding -> pre-norm Blocks (attention + MLP, drop-path) -> norm -> head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "config/attention_spec.h"
#include "models/classifier.h"
#include "models/stem_names.h"
#include "util/attention_geometry.h"

namespace sparsevit::models {

struct VitConfig {
  int64_t img_size = 224;
  int64_t patch_size = 16;
  int64_t in_chans = 3;
  int64_t num_classes = 1000;
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  double drop_rate = 0.0;
  double drop_path_rate = 0.0;
  int64_t num_prefix_tokens = 1;  // tokens before the patches: the class token (the only kind supported)
  // Head input: false = the class token after `norm` (timm's default); true = the mean of the
  // patch tokens through `fc_norm`, with no `norm` (MAE's finetuning default, timm global_pool='avg').
  bool global_pool = false;
  // The patch embedding (one of stem_names()): "patch", timm's patchify Conv2d (kernel = stride =
  // patch_size, `patch_embed.proj`); "conv", the early-convolution stem (models/conv_stem.h,
  // `patch_embed.backbone.*`: patch_size a power of two). The patch grid is the same either way.
  std::string stem = "patch";
  config::AttentionSpec attention;  // dense when it has no mask

  int64_t num_patches() const { return (img_size / patch_size) * (img_size / patch_size); }
  int64_t num_tokens() const { return num_patches() + num_prefix_tokens; }
  int64_t head_dim() const { return embed_dim / num_heads; }
  // What every attention layer of this model sees: N, prefix tokens, heads, head width, depth.
  AttentionGeometry attention_geometry() const {
    return AttentionGeometry{num_tokens(), num_prefix_tokens, num_heads, head_dim(), depth};
  }
};

class ConvStem;  // models/conv_stem.h

// `stem` when it is one of stem_names(); else UsageError "unknown stem 'x' (did you mean ...; known: patch, conv)".
const std::string& check_stem(const std::string& stem);

// Images to patch tokens: `proj` (stem "patch") or `backbone` (stem "conv", a ConvStem).
class PatchEmbed : public torch::nn::Module {
 public:
  PatchEmbed(int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t embed_dim, const std::string& stem);
  at::Tensor forward(const at::Tensor& x);  // [B, C, H, W] -> [B, num_patches, embed_dim]
  const std::string& stem() const { return stem_; }

 private:
  int64_t img_size_, in_chans_;
  std::string stem_;
  torch::nn::Conv2d proj_{nullptr};   // stem "patch"
  std::shared_ptr<ConvStem> backbone_;  // stem "conv"
};

class Mlp : public torch::nn::Module {
 public:
  Mlp(int64_t dim, int64_t hidden, double drop);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  double drop_;
};

class Block : public torch::nn::Module {
 public:
  Block(const VitConfig& c, double drop_path, std::shared_ptr<attention::AttentionModule> attn);
  at::Tensor forward(const at::Tensor& x);
  const attention::AttentionModule& attn() const { return *attn_; }
  attention::AttentionModule& attn() { return *attn_; }
  // What the attention sees: norm1(x).
  at::Tensor attention_input(const at::Tensor& x) { return norm1_->forward(x); }

 private:
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  std::shared_ptr<attention::AttentionModule> attn_;
  std::shared_ptr<Mlp> mlp_;
  double drop_path_;
};

// A stack of c.depth Blocks whose attention modules see `geometry` (the model's, or a shorter
// sequence such as MAE's visible tokens), one pattern per block (nullopt = dense), stochastic
// depth growing linearly as in timm; each block is appended to `list` (which names them 0, 1, ...)
// and backends that share parameters across layers keep them in `shared`.
std::vector<std::shared_ptr<Block>> make_blocks(const VitConfig& c, const AttentionGeometry& geometry,
                                               std::vector<std::optional<patterns::Pattern>> patterns,
                                               torch::nn::ModuleListImpl& list,
                                               std::shared_ptr<attention::SharedAttentionParameters> shared);

class VisionTransformer : public Classifier {
 public:
  // `layer_patterns` (one per block; nullopt = dense) default to the spec's patterns.
  explicit VisionTransformer(const VitConfig& config,
                             std::optional<std::vector<std::optional<patterns::Pattern>>> layer_patterns = std::nullopt);

  at::Tensor forward_features(const at::Tensor& x);  // [B, N, C] after the final norm (global pool: before fc_norm)
  at::Tensor forward_head(const at::Tensor& features, bool pre_logits = false);
  at::Tensor forward(const at::Tensor& x) override { return forward_head(forward_features(x)); }
  // Every block's attention input (its normalised tokens [B, N, C]) for images x, in one
  // pass: what analysis feeds to attention_probs / head_outputs.
  std::vector<at::Tensor> attention_inputs(const at::Tensor& x);

  const VitConfig& config() const override { return config_; }
  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  std::vector<std::optional<patterns::Pattern>> layer_patterns() const override;
  void set_training_progress(double progress) override;
  // Sum over blocks of H * 2 * d_head * pairs per head / 1e9.
  double attention_gflops_now() const override;
  std::string kernel_name() const override;

 private:
  void init_weights();
  at::Tensor embed(const at::Tensor& x);  // patches + class token + position embedding

  VitConfig config_;
  std::shared_ptr<PatchEmbed> patch_embed_;
  at::Tensor cls_token_, pos_embed_;
  std::vector<std::shared_ptr<Block>> blocks_;
  // Attention parameters shared by every block (linformer `share: layerwise`), registered once
  // as `attn_shared` when a backend asked for one.
  std::shared_ptr<attention::SharedAttentionParameters> attn_shared_;
  torch::nn::ModuleList block_list_;  // registers blocks_ as blocks.0, blocks.1, ...
  torch::nn::LayerNorm norm_{nullptr};     // class-token models
  torch::nn::LayerNorm fc_norm_{nullptr};  // global-pool models
  torch::nn::Linear head_{nullptr};
};

// Stochastic depth per sample (timm's drop_path): scales kept samples by 1/keep.
at::Tensor drop_path(const at::Tensor& x, double drop_prob, bool training);

}  // namespace sparsevit::models
