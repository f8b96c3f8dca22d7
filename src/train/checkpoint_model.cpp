#include "train/checkpoint_model.h"

#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/model_registry.h"
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
    }
    if (meta.contains("config") && meta.at("config").contains("dataset"))
      m.dataset = meta.at("config").at("dataset").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(ckpt.path() + ": corrupt model description: " + e.what());
  }
  m.attention = config::parse_attention_spec(m.attention_yaml, ckpt.path() + " (attention)");
  config::apply_mask_kwarg_overrides(m.attention, m.attention_overrides);
  return m;
}

nlohmann::json model_description(const models::VitConfig& c) {
  return {{"img_size", c.img_size}, {"patch_size", c.patch_size}, {"embed_dim", c.embed_dim},
          {"depth", c.depth},       {"num_heads", c.num_heads},   {"global_pool", c.global_pool}};
}

std::shared_ptr<models::VisionTransformer> create_described_model(const CheckpointModel& m) {
  TrainConfig c;  // the flags that would build this model
  c.nb_classes = m.nb_classes;
  c.input_size = m.img_size;
  c.patch_size = m.patch_size;
  c.embed_dim = m.embed_dim;
  c.depth = m.depth;
  c.num_heads = m.num_heads;
  c.global_pool = m.global_pool;
  c.drop_path = 0;
  return models::create_model(m.model, vit_model_options(c, m.attention));
}

std::shared_ptr<models::VisionTransformer> load_checkpoint_model(const LoadedCheckpoint& ckpt) {
  const std::optional<CheckpointModel> m = checkpoint_model(ckpt);
  if (!m) throw RuntimeError(ckpt.path() + " does not say which model it holds (no model metadata)");
  auto model = create_described_model(*m);
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
