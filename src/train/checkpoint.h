// Training checkpoints: the container of weights/checkpoint_file.h holding a run's whole state —
// model, optimizer (section "optimizer"), EMA (section "ema"), epoch, global step, the host
// generator and torch's CPU generator (buffer "torch_rng_state") — and free-form JSON metadata
// (the model description, the resolved config). Resume restores all of it.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include "weights/checkpoint_file.h"
#include "weights/named_tensors.h"

namespace sparsevit::train {

class ModelEma;

// What save_checkpoint writes. Pointers that are null are left out of the file.
struct CheckpointContents {
  const torch::nn::Module* model = nullptr;          // required: named parameters + buffers
  const torch::optim::Optimizer* optimizer = nullptr;
  const ModelEma* ema = nullptr;
  int64_t epoch = 0;          // the trainer's convention; MAE saves the finished epoch and resumes at +1
  int64_t global_step = 0;    // optimizer steps taken
  std::string host_rng_state; // e.g. rng_state_string(mt19937_64); "" : none
  bool save_torch_rng = true; // torch's default CPU generator state
  std::string metadata_json = "{}";  // any JSON text (must parse)
};

// Writes atomically (weights/checkpoint_file.h). Throws RuntimeError "checkpoint PATH: ..." on
// failure (the old file, if any, stays intact) and UsageError when `model` is null or metadata is
// not JSON.
void save_checkpoint(const std::string& path, const CheckpointContents& contents);

// A checkpoint read and verified by weights::CheckpointFile's constructor (RuntimeError
// "checkpoint PATH: ..." on a missing, truncated, corrupt or foreign file). The parts are then
// restored one by one, so a caller can read metadata_json() first (to build the right model) and
// load the weights afterwards.
class LoadedCheckpoint : public weights::CheckpointFile {
 public:
  explicit LoadedCheckpoint(std::string path);

  bool has_optimizer() const { return has_optimizer_; }
  bool has_ema() const { return has_ema_; }
  bool has_torch_rng() const { return torch_rng_state_.defined(); }

  // Copies the weights into `model` (strict: same names and shapes, else RuntimeError naming the
  // first offending parameter; nothing is changed then).
  void load_model(torch::nn::Module& model) const;
  // Restores the optimizer state (moments, step counts); its parameter groups must have the saved
  // sizes and shapes. As in LibTorch, hyper-parameters (lr, weight decay, betas, eps) stay those
  // of `optimizer`: the trainer sets the lr every iteration from the schedule.
  void load_optimizer(torch::optim::Optimizer& optimizer) const;
  // Restores the EMA (RuntimeError when the checkpoint has none or shapes differ).
  void load_ema(ModelEma& ema) const;
  // Restores torch's default CPU generator (RuntimeError when the checkpoint has none).
  void restore_torch_rng() const;

 private:
  bool has_optimizer_ = false, has_ema_ = false;
  at::Tensor torch_rng_state_;
};

// std::mt19937_64 state as text (operator<<) and back; the text is the standard's, so it is the
// same with every standard library. rng_from_state_string throws RuntimeError on bad text.
std::string rng_state_string(const std::mt19937_64& rng);
void rng_from_state_string(std::mt19937_64& rng, const std::string& state);

// Torch's default CPU generator state (a uint8 tensor) and back.
at::Tensor torch_cpu_rng_state();
void set_torch_cpu_rng_state(const at::Tensor& state);

}  // namespace sparsevit::train
