// What a checkpoint says about the model it holds (timm name, classes, the attention YAML and
// its overrides), so eval, resume and analysis commands rebuild exactly that model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/attention_spec.h"

namespace sparsevit::models {
class Classifier;
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
  // The built model's shape (input size, patch, width, depth, heads, pooling): absent from
  // older checkpoints, whose models have the registered shape.
  int64_t img_size = 0, patch_size = 0, embed_dim = 0, depth = 0, num_heads = 0;
  bool global_pool = false;
  std::string dataset;  // the training dataset (its normalisation), "" when unknown
  // Video models: frames per clip (0: an image model), attention type, temporal attention.
  int64_t num_frames = 0;
  std::string attention_type = "divided_space_time";
  std::string temporal_attention_yaml;       // "" : dense
  config::AttentionSpec temporal_attention;  // parsed
};

// The metadata entries that describe `model` (add them to a checkpoint's metadata).
nlohmann::json model_description(const models::Classifier& model);

// nullopt when the checkpoint carries no model description (e.g. written by other tools).
std::optional<CheckpointModel> checkpoint_model(const LoadedCheckpoint& checkpoint);

// Rebuilds the checkpoint's model and loads its weights; RuntimeError when the checkpoint
// does not describe its model.
std::shared_ptr<models::Classifier> load_checkpoint_model(const LoadedCheckpoint& checkpoint);
// The same for commands that analyse image ViTs: UsageError naming `command` for a video model.
std::shared_ptr<models::VisionTransformer> load_checkpoint_vit(const LoadedCheckpoint& checkpoint, const std::string& command);
// The model the description asks for, with random weights.
std::shared_ptr<models::Classifier> create_described_model(const CheckpointModel& description);

// What analysis commands (calibrate, diversity) feed such a model: split `train_split` of
// `dataset` (its standard location when `data_path` is empty), the first `limit` images
// (0: all), through the evaluation transform for the model's input size and channels.
std::unique_ptr<data::DataLoader> model_eval_loader(const models::VitConfig& model, const std::string& dataset,
                                                    const std::string& data_path, bool train_split, int64_t limit,
                                                    const data::LoaderOptions& options);

}  // namespace sparsevit::train
