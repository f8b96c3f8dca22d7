#include "train/checkpoint_model.h"

#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
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

std::unique_ptr<data::DataLoader> model_eval_loader(const models::VitConfig& model, const std::string& dataset,
                                                    const std::string& data_path, bool train_split, int64_t limit,
                                                    const data::LoaderOptions& options) {
  const std::string path = data_path.empty() ? data::default_data_path(dataset) : data_path;
  if (path.empty()) throw UsageError("--data_path is required for dataset '" + dataset + "'");
  const data::TransformConfig tc = data::transform_config_for(dataset, model.img_size, model.in_chans);
  data::validate(tc);
  return std::make_unique<data::DataLoader>(data::max_samples(data::make_dataset(dataset, path, train_split), limit),
                                            data::build_eval_transform(tc), options);
}

}  // namespace sparsevit::train
