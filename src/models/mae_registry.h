// MAE's model names (models_mae.py): mae_vit_base_patch16, mae_vit_large_patch16,
// mae_vit_huge_patch14 with MAE's decoder (512 wide, 8 blocks, 16 heads), and mae_<name> for
// every other registered ViT shape with a small decoder for the CPU models.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/masked_autoencoder.h"
#include "models/model_registry.h"

namespace sparsevit::models {

struct MaeOptions {
  // The encoder as a ViT: input size, channels, shape overrides, stem, attention (default: dense).
  // Classes, pooling and the head do not apply.
  ModelOptions encoder;
  std::optional<int64_t> decoder_embed_dim, decoder_depth, decoder_num_heads;  // default: the model's
  double mask_ratio = 0.75;
  bool norm_pix_loss = false;
  config::AttentionSpec decoder_attention;  // the decoder's
};

std::vector<std::string> mae_model_names();
// The ViT a pretrained MAE encoder finetunes as: mae_vit_base_patch16 -> vit_base_patch16_224.
std::string mae_encoder_name(const std::string& mae_name);
// UsageError "unknown model" (did you mean) for other names.
MaeConfig mae_config(const std::string& name, const MaeOptions& options);
std::shared_ptr<MaskedAutoencoder> create_mae_model(const std::string& name, const MaeOptions& options);

}  // namespace sparsevit::models
