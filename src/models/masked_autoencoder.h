// MAE (He et al. 2022, facebookresearch/mae models_mae.py) with MAE's parameter names, so its
// published checkpoints map one-to-one: patch_embed, cls_token, pos_embed (fixed sin-cos), blocks,
// norm | decoder_embed, mask_token, decoder_pos_embed (fixed), decoder_blocks, decoder_norm,
// decoder_pred.
//
// Sparse attention: the encoder runs on the len_keep = int(P * (1 - mask_ratio)) visible patches
// plus the class token, and its patterns are built for that length, N_enc = len_keep + 1. The
// visible tokens are kept in raster order (MAE keeps them in its random shuffle order), so a
// pattern's offsets count *visible* tokens, not grid positions: offset 1 joins two consecutive
// visible patches, which may be far apart on the grid. Dense attention is permutation-equivariant,
// so with dense attention the two orders give the same loss. The decoder attends over all
// P + 1 tokens with its own config.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <optional>
#include <vector>

#include "models/vision_transformer.h"

namespace sparsevit::models {

struct MaeConfig {
  VitConfig encoder;  // img_size, patch_size, in_chans, embed_dim, depth, num_heads, mlp_ratio, attention
  int64_t decoder_embed_dim = 512, decoder_depth = 8, decoder_num_heads = 16;
  double mask_ratio = 0.75;
  bool norm_pix_loss = false;
  config::AttentionSpec decoder_attention;

  int64_t len_keep() const { return static_cast<int64_t>(static_cast<double>(encoder.num_patches()) * (1.0 - mask_ratio)); }
  // What the encoder's attention sees: the visible patches + the class token.
  AttentionGeometry encoder_geometry() const;
  // The decoder's blocks as a VitConfig (width, depth, heads, attention of the decoder).
  VitConfig decoder() const;
};

struct MaeOutput {
  at::Tensor loss;  // scalar: mean squared error over the masked patches
  at::Tensor pred;  // [B, P, patch*patch*C]
  at::Tensor mask;  // [B, P], 1 = masked (removed from the encoder's input)
};

class MaskedAutoencoder : public torch::nn::Module {
 public:
  explicit MaskedAutoencoder(const MaeConfig& config);

  // noise [B, P] uniform in [0, 1) decides the mask (the len_keep smallest are kept); drawn from
  // torch's generator when not given (MAE's torch.rand).
  MaeOutput forward(const at::Tensor& imgs, const std::optional<at::Tensor>& noise = std::nullopt);
  // MAE's patchify: [B, C, H, W] -> [B, P, p*p*C] (within a patch: row, column, channel).
  at::Tensor patchify(const at::Tensor& imgs) const;
  at::Tensor unpatchify(const at::Tensor& x) const;

  const MaeConfig& config() const { return config_; }
  void set_training_progress(double progress);
  // Attention GFLOPs per sample as the modules compute them now.
  double attention_gflops_encoder() const;
  double attention_gflops_decoder() const;
  std::vector<std::optional<patterns::Pattern>> encoder_layer_patterns() const;
  std::vector<std::optional<patterns::Pattern>> decoder_layer_patterns() const;

 private:
  void initialize_weights();
  // Visible tokens (+ class token) through the encoder; ids_keep [B, len_keep] sorted.
  std::pair<at::Tensor, at::Tensor> forward_encoder(const at::Tensor& imgs, const at::Tensor& noise, at::Tensor& mask);
  at::Tensor forward_decoder(const at::Tensor& latent, const at::Tensor& ids_keep);
  at::Tensor forward_loss(const at::Tensor& imgs, const at::Tensor& pred, const at::Tensor& mask) const;

  MaeConfig config_;
  std::shared_ptr<PatchEmbed> patch_embed_;
  at::Tensor cls_token_, pos_embed_, mask_token_, decoder_pos_embed_;
  std::vector<std::shared_ptr<Block>> blocks_, decoder_blocks_;
  torch::nn::ModuleList block_list_, decoder_block_list_;
  std::shared_ptr<attention::SharedAttentionParameters> attn_shared_, decoder_attn_shared_;
  torch::nn::LayerNorm norm_{nullptr}, decoder_norm_{nullptr};
  torch::nn::Linear decoder_embed_{nullptr}, decoder_pred_{nullptr};
};

}  // namespace sparsevit::models
