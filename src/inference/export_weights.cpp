#include "inference/export_weights.h"

#include <nlohmann/json.hpp>

#include "models/masked_autoencoder.h"
#include "models/vision_transformer.h"
#include "train/checkpoint.h"
#include "train/checkpoint_model.h"
#include "train/pretrained_weights.h"
#include "train/pretrain.h"
#include "util/errors.h"
#include "weights/weight_file.h"

namespace sparsevit::inference {
namespace {

// The checkpoint's model description (model name, shape, attention config, classes, dataset):
// what a reader needs to rebuild the model around the tensors (sparsevit.models.load in Python).
std::map<std::string, std::string> model_metadata(const train::LoadedCheckpoint& ckpt) {
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json());
  nlohmann::json description = nlohmann::json::object();
  for (const char* key : {"model", "nb_classes", "attention_yaml", "attention_overrides", "model_shape",
                          "temporal_attention_yaml", "mae"})
    if (meta.contains(key)) description[key] = meta.at(key);
  if (meta.contains("config") && meta.at("config").contains("dataset"))
    description["dataset"] = meta.at("config").at("dataset");
  return {{"format", "pt"}, {"sparsevit_model", description.dump()}};
}

}  // namespace

ExportSummary export_checkpoint(const std::string& path, const std::string& format, const std::string& output) {
  const weights::WeightFormat target = weights::parse_weight_format_name(format);
  const train::LoadedCheckpoint ckpt(path);
  ExportSummary summary;
  train::NamedTensors tensors;
  if (auto mae = train::load_checkpoint_mae(ckpt)) {
    summary.model = mae->name;
    tensors = train::exported_parameters(*mae->model);
  } else {
    const std::optional<train::CheckpointModel> m = train::checkpoint_model(ckpt);
    if (!m) throw RuntimeError(path + " does not say which model it holds (no model metadata)");
    auto model = train::create_described_model(*m);
    ckpt.load_model(*model);
    summary.model = m->model;
    tensors = train::exported_parameters(*model);
  }
  for (const auto& [name, t] : tensors) summary.parameters += t.numel();
  summary.tensors = static_cast<int64_t>(tensors.size());
  weights::write_weight_file(output, tensors, target, model_metadata(ckpt));
  return summary;
}

}  // namespace sparsevit::inference
