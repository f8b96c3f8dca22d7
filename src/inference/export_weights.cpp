#include "inference/export_weights.h"

#include "models/masked_autoencoder.h"
#include "models/vision_transformer.h"
#include "train/checkpoint.h"
#include "train/checkpoint_model.h"
#include "train/pretrained_weights.h"
#include "train/pretrain.h"
#include "util/errors.h"
#include "weights/weight_file.h"

namespace sparsevit::inference {

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
  weights::write_weight_file(output, tensors, target);
  return summary;
}

}  // namespace sparsevit::inference
