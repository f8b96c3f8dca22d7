// The epoch loop every pipeline runs (MAE's main_* `for epoch in range(start, epochs)`): train
// one epoch, let the pipeline evaluate, write the metrics record, print the progress line, save
// the checkpoints. What differs between pipelines comes in through EpochHooks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "train/engine.h"
#include "train/metrics_log.h"
#include "train/process_context.h"

namespace sparsevit::train {

// Where and how often a run saves (rank 0 only, and only with an output folder).
struct EpochCheckpoints {
  std::string output_dir;   // "" : no checkpoints
  int64_t save_ckpt_freq = 0;  // also checkpoint-<epoch>.pt every this many epochs (0: never)
  nlohmann::json metadata = nlohmann::json::object();  // the model description and the run's config
};

// One epoch's line in the log, as the pipeline reports it.
struct EpochReport {
  nlohmann::json fields = nlohmann::json::object();  // added to the metrics record
  std::string text;  // the progress line between "Epoch i/n: " and "(seconds)"
  bool best = false;  // the pipeline's selection metric (e.g. validation loss) improved: checkpoint-best.pt
};

struct EpochHooks {
  // After the epoch's training (evaluation belongs here: the epoch's seconds include it).
  std::function<EpochReport(int64_t epoch, const EpochStats& train)> report;
  // The metrics key of the training throughput (samples of all ranks per second).
  std::string throughput_key = "train_images_per_second";
};

// What the loop did, for the run's summary.
struct EpochsRun {
  int64_t epochs = 0;            // run by this call (0 when resumed at the end)
  double first_loss = 0;         // train loss of the first epoch run
  double last_loss = 0;          // and of the last
  std::string checkpoint;        // checkpoint.pt, once written ("" : none)
};

// Runs epochs [first_epoch, state.options().epochs). Each writes one metrics record ("epoch",
// "train_loss", "lr", "epoch_seconds", the throughput, "attention_gflops", then the report's
// fields) to `metrics` when given, prints "Epoch i/n: <report text>  (s s)" on the main rank,
// and saves checkpoint.pt (plus checkpoint-<epoch>.pt every save_ckpt_freq epochs, and
// checkpoint-best.pt when the report says the epoch is the best so far: timm's model_best).
EpochsRun run_epochs(TrainTask& task, TrainState& state, data::BatchSource& loader, ProcessContext& process,
                   int64_t first_epoch, const EpochCheckpoints& checkpoints, MetricsLog* metrics,
                   const EpochHooks& hooks);

// The checkpoints of one epoch (see run_epochs); returns the path of checkpoint.pt ("" : none).
std::string save_epoch_checkpoints(const TrainState& state, const EpochCheckpoints& checkpoints, int64_t epoch,
                                   const ProcessContext& process, bool best = false);

}  // namespace sparsevit::train
