// The finetune / eval pipeline (MAE's main_finetune.py in C++): data -> ViT with the
// configured attention -> the shared engine (train/engine.h: AdamW + cosine schedule + EMA,
// gradient accumulation, data parallelism) -> metrics.jsonl, atomic checkpoints, and a final
// summary (top-1, attention GFLOPs, pruning ratio).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipelines/train_config.h"

namespace sparsevit::pipelines {

struct TrainSummary {
  double test_acc1 = 0, test_acc5 = 0, test_loss = 0;
  double ema_acc1 = -1;             // -1 when EMA is off
  double attention_gflops = 0, attention_gflops_patch = 0, pruning_ratio = 0, density = 1;
  // Mean attention GFLOPs per sample over the training iterations: differs from the final
  // attention_gflops when the budget is scheduled (top-k's k_start -> k_end).
  double attention_gflops_paid = 0;
  // Video models: the attention GFLOPs per clip of the spatial and the temporal attention, and
  // the clips whose video was shorter than the sampling window (padded with its last frame).
  bool video = false;
  double spatial_gflops = 0, temporal_gflops = 0;
  int64_t padded_clips = 0;
  int64_t params = 0;
  int64_t epochs_run = 0;
  // The images this run trained and was evaluated on (after --max_*_samples): the recipe records
  // the limits, not how many images the data path held.
  int64_t train_samples = 0, eval_samples = 0;
  int64_t rank = 0, world_size = 1;  // this process in a data-parallel run (not in to_json)
  nlohmann::json to_json() const;
  // One readable line: top-1, attention GFLOPs, pruning ratio.
  std::string to_text() const;
};

// Trains (or, with config.eval, only evaluates) and returns the final numbers.
TrainSummary run_finetune(const TrainConfig& config);

}  // namespace sparsevit::pipelines
