#include "train/checkpoint_model.h"

#include <nlohmann/json.hpp>

#include "models/model_registry.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::train {

std::optional<CheckpointModel> checkpoint_model(const LoadedCheckpoint& ckpt) {
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json(), nullptr, false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("model") || !meta.contains("attention_yaml"))
    return std::nullopt;
  CheckpointModel m;
  try {
    m.model = meta.at("model").get<std::string>();
    m.nb_classes = meta.value("nb_classes", int64_t{0});
    m.attention_yaml = meta.at("attention_yaml").get<std::string>();
    m.attention_overrides = meta.value("attention_overrides", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(ckpt.path() + ": corrupt model description: " + e.what());
  }
  m.attention = config::parse_attention_spec(m.attention_yaml, ckpt.path() + " (attention)");
  config::apply_mask_kwarg_overrides(m.attention, m.attention_overrides);
  return m;
}

std::shared_ptr<models::VisionTransformer> load_checkpoint_model(const LoadedCheckpoint& ckpt) {
  const std::optional<CheckpointModel> m = checkpoint_model(ckpt);
  if (!m) throw RuntimeError(ckpt.path() + " does not say which model it holds (no model metadata)");
  models::ModelOptions options;
  if (m->nb_classes > 0) options.num_classes = m->nb_classes;
  options.attention = m->attention;
  auto model = models::create_model(m->model, options);
  ckpt.load_model(*model);
  return model;
}

}  // namespace sparsevit::train
