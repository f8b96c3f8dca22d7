// The diffusion policy's training pipeline (Diffusion Policy's train.py, TrainDiffusionUnet...
// workspace, in C++ on the shared engine): demonstrations (our .episodes file or Diffusion
// Policy's zarr store) -> padded windows -> DiffusionPolicy (ViT encoder with the configured
// attention) -> AdamW with warm-up + cosine, EMA with Diffusion Policy's warm-up, data
// parallelism, atomic checkpoints, metrics.jsonl -> closed-loop PushT evaluation of the
// (EMA) policy. docs/policy.md.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "episodes/episode_set.h"
#include "pipelines/policy_eval.h"
#include "pipelines/train_config.h"
#include "policy/image_probe.h"

namespace sparsevit::pipelines {

struct PolicyTrainSummary {
  double train_loss = 0, first_epoch_loss = 0;  // mean total loss of the last / first epoch run
  double reconstruction_loss = 0;               // Crossway's part of the last epoch (0: off)
  double pose_loss = 0;                         // the block-pose head's weighted part of the last epoch (0: off)
  int64_t params = 0, epochs_run = 0, windows = 0, episodes = 0;
  double encoder_attention_gflops = 0;          // per observation image
  double pruning_ratio = 0;                     // of the encoder's attention
  double seconds = 0;
  int64_t rank = 0, world_size = 1;
  std::string checkpoint;
  std::string obs_type = "image";
  bool validated = false;        // the validation loss chose the evaluated checkpoint
  double best_val_loss = 0;
  int64_t best_epoch = -1;
  std::string evaluated_checkpoint;  // checkpoint-best.pt when validated ("" : the last epoch's weights)
  bool evaluated = false;
  PolicyEvalResult eval;             // held-out seeds (eval_seed..)
  bool evaluated_train = false;
  PolicyEvalResult eval_train;       // training seeds (0..)
  bool probed = false;  // the image probe ran (--probe_batches > 0)
  policy::ImageProbeResult probe;
  nlohmann::json to_json() const;
  std::string to_text() const;
};


// The defaults of `sparsevit policy train`: Diffusion Policy's PushT recipe (AdamW lr 1e-4,
// weight decay 1e-6, betas 0.95 / 0.999, EMA) on the CPU-sized encoder.
TrainConfig policy_defaults();

// Trains (fields of train::kPolicy apply) with a validation loss each epoch on the episodes
// --max_train_samples leaves out (val_batches; the best epoch saved as checkpoint-best.pt), runs
// the image probe on probe_batches batches (those episodes, else the last 10%, seen in training),
// then evaluates in closed loop on eval_episodes held-out seeds and eval_train_episodes training
// seeds; all with the best epoch's weights when validated, else the last, EMA weights when the run
// keeps an EMA.
PolicyTrainSummary run_policy_train(const TrainConfig& config);

}  // namespace sparsevit::pipelines
