// The MAE pretraining pipeline (MAE's main_pretrain.py in C++): unlabelled images with
// RandomResizedCrop(0.2, 1) + flip -> MaskedAutoencoder (sparse attention in the encoder over the
// visible tokens and in the decoder over all of them) -> the shared engine (AdamW betas 0.9/0.95,
// warm-up + cosine per iteration, gradient accumulation, data parallelism) -> metrics.jsonl,
// atomic checkpoints, reconstruction PNGs and a summary.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "data/dataset.h"
#include "data/transforms.h"
#include "pipelines/train_config.h"

namespace sparsevit::models {
class MaskedAutoencoder;
}

namespace sparsevit::train {
class LoadedCheckpoint;
}

namespace sparsevit::pipelines {

struct PretrainSummary {
  double train_loss = 0;            // mean reconstruction loss of the last epoch
  double first_epoch_loss = 0;      // of the first epoch run (the loss should fall)
  double attention_gflops_encoder = 0, attention_gflops_decoder = 0;  // per sample, as computed
  int64_t encoder_tokens = 0, decoder_tokens = 0;
  int64_t params = 0, epochs_run = 0;
  int64_t rank = 0, world_size = 1;
  std::string checkpoint;           // the last checkpoint written ("" : none)
  nlohmann::json to_json() const;
  std::string to_text() const;
};

// What MAE pretrains on: the training images and their transform; `eval` holds the images the
// reconstructions are drawn from when they are not the dataset's test split (demonstrations:
// the held-out episodes' frames). A demonstration file (`--dataset demonstrations`, or `auto`
// with a .episodes file or a .zarr folder) gives its camera frames at the encoder's size, the
// first --max_train_samples episodes for training, normalised as the policy does (mean = std =
// 0.5: [0, 1] -> [-1, 1]) with neither flip nor crop unless --train_crop asks for one.
struct PretrainImages {
  std::string dataset;
  std::shared_ptr<const data::Dataset> train, eval;
  data::TransformConfig transform;
};
PretrainImages pretrain_images(const TrainConfig& config, int64_t img_size, int64_t in_chans);

// Pretrains; `config` fields of the pretrain command (train::kPretrain) apply.
PretrainSummary run_pretrain(const TrainConfig& config);

// The defaults of `sparsevit pretrain` (MAE's recipe on the CPU quickstart model).
TrainConfig pretrain_defaults();

struct LoadedMae {
  std::string name;
  std::shared_ptr<models::MaskedAutoencoder> model;
};
// The MAE model of a pretrain checkpoint, rebuilt and loaded; nullopt for other checkpoints.
std::optional<LoadedMae> load_checkpoint_mae(const train::LoadedCheckpoint& checkpoint);

}  // namespace sparsevit::pipelines
