#include "train/checkpoint_model.h"

#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/model_registry.h"
#include "models/timesformer.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"
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
    if (meta.contains("model_shape")) {
      const nlohmann::json& shape = meta.at("model_shape");
      m.img_size = shape.at("img_size").get<int64_t>();
      m.patch_size = shape.at("patch_size").get<int64_t>();
      m.embed_dim = shape.at("embed_dim").get<int64_t>();
      m.depth = shape.at("depth").get<int64_t>();
      m.num_heads = shape.at("num_heads").get<int64_t>();
      m.global_pool = shape.at("global_pool").get<bool>();
      m.num_frames = shape.value("num_frames", int64_t{0});
      m.attention_type = shape.value("attention_type", std::string("divided_space_time"));
    }
    m.temporal_attention_yaml = meta.value("temporal_attention_yaml", std::string());
    if (meta.contains("config") && meta.at("config").contains("dataset"))
      m.dataset = meta.at("config").at("dataset").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(ckpt.path() + ": corrupt model description: " + e.what());
  }
  m.attention = config::parse_attention_spec(m.attention_yaml, ckpt.path() + " (attention)");
  config::apply_mask_kwarg_overrides(m.attention, m.attention_overrides);
  if (!m.temporal_attention_yaml.empty())
    m.temporal_attention = config::parse_attention_spec(m.temporal_attention_yaml, ckpt.path() + " (temporal attention)");
  return m;
}

nlohmann::json model_description(const models::Classifier& model) {
  const models::VitConfig& c = model.config();
  nlohmann::json j = {{"img_size", c.img_size}, {"patch_size", c.patch_size}, {"embed_dim", c.embed_dim},
                      {"depth", c.depth},       {"num_heads", c.num_heads},   {"global_pool", c.global_pool}};
  if (const auto* video = dynamic_cast<const models::TimeSformer*>(&model)) {
    j["num_frames"] = video->num_frames();
    j["attention_type"] = models::video_attention_name(video->video_config().attention_type);
  }
  return j;
}

std::shared_ptr<models::Classifier> create_described_model(const CheckpointModel& m) {
  TrainConfig c;  // the flags that would build this model
  c.nb_classes = m.nb_classes;
  c.input_size = m.img_size;
  c.patch_size = m.patch_size;
  c.embed_dim = m.embed_dim;
  c.depth = m.depth;
  c.num_heads = m.num_heads;
  c.global_pool = m.global_pool;
  c.num_frames = m.num_frames;
  c.attention_type = m.attention_type;
  c.drop_path = 0;
  return models::create_classifier(m.model, vit_model_options(c, m.attention, m.temporal_attention));
}

std::shared_ptr<models::Classifier> load_checkpoint_model(const LoadedCheckpoint& ckpt) {
  const std::optional<CheckpointModel> m = checkpoint_model(ckpt);
  if (!m) throw RuntimeError(ckpt.path() + " does not say which model it holds (no model metadata)");
  auto model = create_described_model(*m);
  ckpt.load_model(*model);
  return model;
}

std::shared_ptr<models::VisionTransformer> load_checkpoint_vit(const LoadedCheckpoint& ckpt, const std::string& command) {
  auto model = std::dynamic_pointer_cast<models::VisionTransformer>(load_checkpoint_model(ckpt));
  if (!model) throw UsageError(command + " analyses image models; " + ckpt.path() + " holds a video model");
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
