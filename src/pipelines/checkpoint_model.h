// The model a training checkpoint holds, rebuilt from its description (models/model_description.h)
// and loaded: what eval, resume, predict, export and the analysis commands start from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "models/model_description.h"

namespace sparsevit::models {
class Classifier;
class VisionTransformer;
struct VitConfig;
}  // namespace sparsevit::models

namespace sparsevit::data {
class DataLoader;
struct LoaderOptions;
}  // namespace sparsevit::data

namespace sparsevit::train {
class LoadedCheckpoint;
}

namespace sparsevit::pipelines {

// The checkpoint's model description; nullopt when it carries none (e.g. written by other tools).
std::optional<models::ModelDescription> checkpoint_description(const train::LoadedCheckpoint& checkpoint);
// Its classifier description; nullopt for MAE and policy checkpoints and those without one.
std::optional<models::ClassifierDescription> checkpoint_classifier(const train::LoadedCheckpoint& checkpoint);

// Rebuilds the checkpoint's model and loads its weights; RuntimeError when the checkpoint
// does not describe a classifier.
std::shared_ptr<models::Classifier> load_checkpoint_model(const train::LoadedCheckpoint& checkpoint);
// The same for commands that analyse image ViTs: UsageError naming `command` for a video model.
std::shared_ptr<models::VisionTransformer> load_checkpoint_vit(const train::LoadedCheckpoint& checkpoint,
                                                               const std::string& command);

// What analysis commands (calibrate, diversity) feed such a model: split `train_split` of
// `dataset` (its standard location when `data_path` is empty), the first `limit` images
// (0: all), through the evaluation transform for the model's input size and channels.
std::unique_ptr<data::DataLoader> model_eval_loader(const models::VitConfig& model, const std::string& dataset,
                                                    const std::string& data_path, bool train_split, int64_t limit,
                                                    const data::LoaderOptions& options);

}  // namespace sparsevit::pipelines
