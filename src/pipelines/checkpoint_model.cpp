#include "pipelines/checkpoint_model.h"

#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/model_registry.h"
#include "models/vision_transformer.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::pipelines {

std::optional<models::ModelDescription> checkpoint_description(const train::LoadedCheckpoint& ckpt) {
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json(), nullptr, false);
  if (meta.is_discarded()) return std::nullopt;
  return models::read_model_description(meta, ckpt.path());
}

std::optional<models::ClassifierDescription> checkpoint_classifier(const train::LoadedCheckpoint& ckpt) {
  std::optional<models::ModelDescription> described = checkpoint_description(ckpt);
  if (!described || !described->classifier) return std::nullopt;
  return std::move(described->classifier);
}

std::shared_ptr<models::Classifier> load_checkpoint_model(const train::LoadedCheckpoint& ckpt) {
  const std::optional<models::ClassifierDescription> m = checkpoint_classifier(ckpt);
  if (!m) throw RuntimeError(ckpt.path() + " does not say which model it holds (no model metadata)");
  auto model = models::create_classifier(m->model, models::model_options(*m));
  ckpt.load_model(*model);
  return model;
}

std::shared_ptr<models::VisionTransformer> load_checkpoint_vit(const train::LoadedCheckpoint& ckpt,
                                                               const std::string& command) {
  auto model = std::dynamic_pointer_cast<models::VisionTransformer>(load_checkpoint_model(ckpt));
  if (!model) throw UsageError(command + " analyses image models; " + ckpt.path() + " holds a video model");
  return model;
}

std::unique_ptr<data::DataLoader> model_eval_loader(const models::VitConfig& model, const std::string& dataset,
                                                    const std::string& data_path, bool train_split, int64_t limit,
                                                    const data::LoaderOptions& options) {
  const std::string path = data::resolve_data_path(dataset, data_path);
  const data::TransformConfig tc = data::transform_config_for(dataset, model.img_size, model.in_chans);
  data::validate(tc);
  return std::make_unique<data::DataLoader>(data::max_samples(data::make_dataset(dataset, path, train_split), limit),
                                            data::build_eval_transform(tc), options);
}

}  // namespace sparsevit::pipelines
