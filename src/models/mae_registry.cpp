#include "models/mae_registry.h"

#include <algorithm>

#include "models/model_registry.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

constexpr const char* kPrefix = "mae_";

// MAE's three published models keep MAE's names; their encoders are the timm shapes.
const std::vector<std::pair<std::string, std::string>>& published() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"mae_vit_base_patch16", "vit_base_patch16_224"},
      {"mae_vit_large_patch16", "vit_large_patch16_224"},
      {"mae_vit_huge_patch14", "vit_huge_patch14_224"},
  };
  return names;
}

}  // namespace

std::vector<std::string> mae_model_names() {
  std::vector<std::string> names;
  for (const auto& [mae, vit] : published()) names.push_back(mae);
  for (const auto& shape : model_shapes()) {
    if (shape.is_video()) continue;  // MAE pretrains image encoders
    bool covered = false;
    for (const auto& [mae, vit] : published()) covered |= vit == shape.name;
    if (!covered) names.push_back(kPrefix + shape.name);
  }
  return names;
}

std::string mae_encoder_name(const std::string& name) {
  for (const auto& [mae, vit] : published())
    if (mae == name) return vit;
  const std::vector<std::string> known = mae_model_names();
  if (name.rfind(kPrefix, 0) == 0 && std::find(known.begin(), known.end(), name) != known.end())
    return name.substr(4);
  throw UsageError(unknown_name_message("MAE model", name, known));
}

MaeConfig mae_config(const std::string& name, const MaeOptions& o) {
  const ModelShape& shape = find_model_shape(mae_encoder_name(name));
  MaeConfig c;
  c.encoder = vit_config(shape, o.encoder);
  const bool large = shape.embed_dim >= 768;
  // MAE's decoder for ViT-B/L/H; for the small CPU models a decoder as wide as the encoder with
  // two blocks (MAE's ablations: depth matters little for finetuning, a light decoder is cheap).
  c.decoder_embed_dim = o.decoder_embed_dim.value_or(large ? 512 : shape.embed_dim);
  c.decoder_depth = o.decoder_depth.value_or(large ? 8 : 2);
  c.decoder_num_heads = o.decoder_num_heads.value_or(large ? 16 : shape.num_heads);
  c.mask_ratio = o.mask_ratio;
  c.norm_pix_loss = o.norm_pix_loss;
  c.decoder_attention = o.decoder_attention;
  return c;
}

std::shared_ptr<MaskedAutoencoder> create_mae_model(const std::string& name, const MaeOptions& options) {
  return std::make_shared<MaskedAutoencoder>(mae_config(name, options));
}

}  // namespace sparsevit::models
