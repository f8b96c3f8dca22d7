#include "train/checkpoint.h"

#include <mutex>
#include <sstream>
#include <type_traits>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "train/model_ema.h"
#include "util/errors.h"

namespace sparsevit::train {

namespace {

using weights::first_line;

// The buffer that holds torch's default CPU generator.
constexpr const char* kTorchRngKey = "torch_rng_state";

// Key of a parameter in Optimizer::state(): the TensorImpl address as text in LibTorch 1.x
// (c10::guts::to_string of the pointer), the address itself (void*) in LibTorch 2.x.
using OptimizerStateKey =
    typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

template <typename Key = OptimizerStateKey>
Key optimizer_state_key(const at::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << static_cast<const void*>(param.unsafeGetTensorImpl());
    return out.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

// Moves AdamW state tensors to the device of their parameter (the archive is loaded on the CPU so
// a GPU checkpoint can be inspected anywhere) and checks their shapes.
void place_adamw_state(torch::optim::Optimizer& optimizer, const std::string& context) {
  auto* adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer);
  if (adamw == nullptr) return;
  for (const auto& group : adamw->param_groups()) {
    for (const auto& p : group.params()) {
      auto it = adamw->state().find(optimizer_state_key(p));
      if (it == adamw->state().end()) continue;
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      for (at::Tensor* t : {&s.exp_avg(), &s.exp_avg_sq(), &s.max_exp_avg_sq()}) {
        if (!t->defined() || t->numel() == 0) continue;
        if (t->sizes() != p.sizes()) {
          throw RuntimeError(context + ": optimizer state of shape " + weights::shape_string(*t) + " does not fit a parameter of shape " +
                             weights::shape_string(p) + " (was it saved from a different model?)");
        }
        *t = t->to(p.device(), p.scalar_type());
      }
    }
  }
}

}  // namespace

std::string rng_state_string(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

void rng_from_state_string(std::mt19937_64& rng, const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 parsed;
  in >> parsed;
  if (in.fail()) throw RuntimeError("invalid std::mt19937_64 state text (" + std::to_string(state.size()) + " chars)");
  rng = parsed;
}

at::Tensor torch_cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_torch_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

void save_checkpoint(const std::string& path, const CheckpointContents& c) {
  if (c.model == nullptr) throw UsageError("checkpoint " + path + ": no model to save");
  std::vector<weights::CheckpointSection> sections;
  if (c.optimizer != nullptr)
    sections.push_back({"optimizer", [&](torch::serialize::OutputArchive& a) { c.optimizer->save(a); }});
  if (c.ema != nullptr) sections.push_back({"ema", [&](torch::serialize::OutputArchive& a) { c.ema->save(a); }});
  weights::NamedTensors buffers;
  if (c.save_torch_rng) buffers.emplace_back(kTorchRngKey, torch_cpu_rng_state());
  weights::write_checkpoint_file(path, {c.epoch, c.global_step, c.host_rng_state, c.metadata_json},
                                 weights::named_state(*c.model), sections, buffers);
}

LoadedCheckpoint::LoadedCheckpoint(std::string path) : weights::CheckpointFile(std::move(path)) {
  has_optimizer_ = has_section("optimizer");
  has_ema_ = has_section("ema");
  torch_rng_state_ = buffer(kTorchRngKey);
}

void LoadedCheckpoint::load_model(torch::nn::Module& model) const {
  weights::copy_named_into(model_tensors(), weights::named_state(model), "checkpoint " + path());
}

void LoadedCheckpoint::load_optimizer(torch::optim::Optimizer& optimizer) const {
  const std::string context = "checkpoint " + path();
  if (!has_optimizer_) throw RuntimeError(context + ": holds no optimizer state");
  try {
    torch::serialize::InputArchive nested;
    read_section("optimizer", nested);
    optimizer.load(nested);
  } catch (const c10::Error& e) {
    throw RuntimeError(context + ": optimizer state does not fit this optimizer: " + first_line(e));
  }
  place_adamw_state(optimizer, context);
}

void LoadedCheckpoint::load_ema(ModelEma& ema) const {
  const std::string context = "checkpoint " + path() + " (EMA)";
  if (!has_ema_) throw RuntimeError("checkpoint " + path() + ": holds no EMA state (was --model_ema off?)");
  try {
    torch::serialize::InputArchive nested;
    read_section("ema", nested);
    ema.load(nested, context);
  } catch (const c10::Error& e) {
    throw RuntimeError(context + ": " + first_line(e));
  }
}

void LoadedCheckpoint::restore_torch_rng() const {
  if (!torch_rng_state_.defined()) throw RuntimeError("checkpoint " + path() + ": holds no torch RNG state");
  try {
    set_torch_cpu_rng_state(torch_rng_state_);
  } catch (const c10::Error& e) {
    throw RuntimeError("checkpoint " + path() + ": invalid torch RNG state: " + first_line(e));
  }
}

}  // namespace sparsevit::train
