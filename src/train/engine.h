// The training engine every pipeline shares, in the shape of MAE's engine_*.py: a run's
// optimisation state (TrainState, built once), one epoch of training (train_one_epoch) and one
// evaluation pass (evaluate_classifier). What differs between pipelines — the loss of a batch,
// scheduled budgets, the attention cost — comes in through a TrainTask; the main_* files
// (finetune.cpp, ...) build the model, data and task and loop over epochs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "data/data_loader.h"
#include "distributed/gradient_reducer.h"
#include "train/lr_schedule.h"
#include "train/model_ema.h"
#include "train/process_context.h"

namespace sparsevit::train {

class LoadedCheckpoint;

// What differs between pipelines.
class TrainTask {
 public:
  virtual ~TrainTask() = default;
  // The loss of one training batch (the model is in training mode); the engine runs backward.
  virtual at::Tensor loss(const data::Batch& batch, std::mt19937_64& host_rng) = 0;
  // Training progress in [0, 1] (iterations done / total): scheduled budgets follow it.
  virtual void set_progress(double progress) {}
  // Attention GFLOPs per sample that the model computes at this moment (what a step pays).
  virtual double attention_gflops_now() const { return 0; }
};

struct OptimizationOptions {
  double lr = 1e-3;              // absolute (the caller resolves blr)
  double min_lr = 1e-6;
  double warmup_epochs = 1;
  double weight_decay = 0.05;
  double opt_eps = 1e-6;
  std::pair<double, double> betas = {0.9, 0.999};  // AdamW (MAE pretraining: 0.9, 0.95)
  double clip_grad = 0;          // 0: off
  // Never weight-decayed besides biases and 1-d tensors (timm's no_weight_decay(); MAE's
  // pretraining decays everything else, cls_token and mask_token included: empty list).
  std::vector<std::string> no_weight_decay_names = {"pos_embed", "cls_token", "dist_token"};
  double layer_decay = 1.0;      // MAE's layer-wise lr decay (1: off); needs num_layers
  int64_t num_layers = 0;        // the model's blocks + 1
  std::string layer_prefix;      // where the ViT sits in the model ("" : it is the model; see OptimizerConfig)
  int64_t accum_iter = 1;        // optimizer step every accum_iter batches
  bool model_ema = false;
  double model_ema_decay = 0.9999;
  // Set: the decay follows Diffusion Policy's warm-up (capped at model_ema_decay) instead of
  // timm's constant decay.
  std::optional<EmaWarmup> model_ema_warmup;
  int64_t epochs = 1;
  double dist_bucket_mb = 25;
  bool dist_no_overlap = false;
  uint64_t host_seed = 0;        // the host generator (mixup, ...)
  int64_t print_freq = 0;        // progress lines per epoch off a terminal (0: auto)
  bool amp_bf16 = false;         // the task's loss (forward) under bfloat16 autocast
};

// Optimizer, schedule, EMA, gradient averaging, generators and counters of one run.
class TrainState {
 public:
  // Restores `checkpoint` (weights, optimizer, EMA, generators, counters) when given; the EMA
  // is built from the restored weights (timm's order). In a data-parallel run rank 0's weights
  // are broadcast and gradient averaging is set up.
  TrainState(torch::nn::Module& model, const OptimizationOptions& options, ProcessContext& process,
             const LoadedCheckpoint* checkpoint);
  ~TrainState();

  torch::nn::Module& model() { return model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  ModelEma* ema() { return ema_ ? &*ema_ : nullptr; }
  const OptimizationOptions& options() const { return options_; }
  int64_t start_epoch() const { return start_epoch_; }
  int64_t global_step() const { return global_step_; }
  // Mean attention GFLOPs per sample over every training iteration so far (resumes included).
  double attention_gflops_paid() const;

  // Atomic checkpoint of everything above plus `metadata` (a JSON object) after `epoch`.
  void save_checkpoint(const std::string& path, int64_t epoch, const nlohmann::json& metadata) const;

 private:
  friend struct EpochRunner;
  torch::nn::Module& model_;
  OptimizationOptions options_;
  ProcessContext& process_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::optional<ModelEma> ema_;
  std::optional<dist::GradientReducer> reducer_;
  std::vector<at::Tensor> trainable_;
  std::vector<double> lr_scales_;  // per parameter group (layer decay)
  std::mt19937_64 host_rng_;
  int64_t start_epoch_ = 0, global_step_ = 0;
  double attention_gflops_sum_ = 0;
  int64_t attention_iterations_ = 0;
};

struct EpochStats {
  double loss = 0;               // mean over the epoch's batches (and ranks)
  double images = 0;             // seen by all ranks
  double train_seconds = 0;
  double lr = 0;                 // at the last iteration
  double attention_gflops = 0;   // mean per sample over the epoch's iterations
};

// One epoch of training (MAE's train_one_epoch): per-iteration cosine lr at each optimizer
// step, progress to the task, loss / accum_iter backward, gradient averaging on the step's
// last batch only, clipping, optimizer step, EMA update.
EpochStats train_one_epoch(TrainTask& task, TrainState& state, data::BatchSource& loader, int64_t epoch,
                           ProcessContext& process);

struct ClassifierMetrics {
  double loss = 0, acc1 = 0, acc5 = 0;  // mean cross-entropy, top-1 and top-5 (%)
};

// Several samples per item (TimeSformer's multi-view test: clips x crops of one video): sample
// i is a view of item i / views, and an item's logits are the mean of its views' logits.
struct EvalViews {
  int64_t views = 1;      // 1: every sample is scored on its own
  int64_t num_items = 0;  // items (videos) in the whole evaluation set, when views > 1
};

// Evaluates a classifier on `loader` (every rank its shard; the sums are added over ranks).
ClassifierMetrics evaluate_classifier(torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& forward,
                                      int64_t num_classes, data::BatchSource& loader, int64_t epoch,
                                      ProcessContext& process, const EvalViews& views = {});

}  // namespace sparsevit::train
