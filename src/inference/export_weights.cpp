#include "inference/export_weights.h"

#include <nlohmann/json.hpp>

#include "models/masked_autoencoder.h"
#include "models/model_description.h"
#include "models/pretrained_weights.h"
#include "models/vision_transformer.h"
#include "pipelines/checkpoint_model.h"
#include "pipelines/pretrain.h"
#include "train/checkpoint.h"
#include "util/errors.h"
#include "weights/weight_file.h"

namespace sparsevit::inference {

ExportSummary export_checkpoint(const std::string& path, const std::string& format, const std::string& output) {
  const weights::WeightFormat target = weights::parse_weight_format_name(format);
  const train::LoadedCheckpoint ckpt(path);
  const std::optional<models::ModelDescription> description = pipelines::checkpoint_description(ckpt);
  ExportSummary summary;
  weights::NamedTensors tensors;
  if (description && description->mae) {
    auto mae = pipelines::load_checkpoint_mae(ckpt);
    summary.model = mae->name;
    tensors = models::exported_parameters(*mae->model);
  } else if (description && description->classifier) {
    summary.model = description->classifier->model;
    tensors = models::exported_parameters(*pipelines::load_checkpoint_model(ckpt));
  } else {
    throw RuntimeError(path + " does not say which model it holds (no model metadata)");
  }
  for (const auto& [name, t] : tensors) summary.parameters += t.numel();
  summary.tensors = static_cast<int64_t>(tensors.size());
  // The model's description travels with the tensors: what sparsevit.models.load (Python) rebuilds from.
  weights::write_weight_file(output, tensors, target,
                             {{"format", "pt"}, {"sparsevit_model", models::model_description_json(*description).dump()}});
  return summary;
}

}  // namespace sparsevit::inference
