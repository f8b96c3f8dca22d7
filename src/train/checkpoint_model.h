// What a checkpoint says about the model it holds (timm name, classes, the attention YAML and
// its overrides), so eval, resume and analysis commands rebuild exactly that model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/attention_spec.h"

namespace sparsevit::models {
class VisionTransformer;
struct VitConfig;
}

namespace sparsevit::data {
class DataLoader;
struct LoaderOptions;
}

namespace sparsevit::train {

class LoadedCheckpoint;

struct CheckpointModel {
  std::string model;
  int64_t nb_classes = 0;
  std::string attention_yaml;
  std::vector<std::string> attention_overrides;  // --attn-set NAME=VALUE
  config::AttentionSpec attention;                // parsed, overrides applied
};

// nullopt when the checkpoint carries no model description (e.g. written by other tools).
std::optional<CheckpointModel> checkpoint_model(const LoadedCheckpoint& checkpoint);

// Rebuilds the checkpoint's model and loads its weights; RuntimeError when the checkpoint
// does not describe its model.
std::shared_ptr<models::VisionTransformer> load_checkpoint_model(const LoadedCheckpoint& checkpoint);

// What analysis commands (calibrate, diversity) feed such a model: split `train_split` of
// `dataset` (its standard location when `data_path` is empty), the first `limit` images
// (0: all), through the evaluation transform for the model's input size and channels.
std::unique_ptr<data::DataLoader> model_eval_loader(const models::VitConfig& model, const std::string& dataset,
                                                    const std::string& data_path, bool train_split, int64_t limit,
                                                    const data::LoaderOptions& options);

}  // namespace sparsevit::train
