#include "benchmarks/model_benchmark.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>

#include "benchmarks/cpu_memory_tracker.h"
#include "benchmarks/op_profiler.h"
#include "benchmarks/timing.h"
#include "config/attention_spec.h"
#include "models/model_registry.h"
#include "patterns/pattern_stats.h"
#include "runtime/autocast.h"
#include "runtime/cpu_threads.h"
#include "runtime/malloc_cache.h"
#include "train/optimizer.h"
#include "util/errors.h"

namespace sparsevit::benchmarks {
namespace {

using Clock = std::chrono::steady_clock;

// One model and what a step needs: its optimizer (training) and the batch.
struct Bench {
  ModelTiming* timing = nullptr;
  std::shared_ptr<models::VisionTransformer> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::vector<double> times;
};

}  // namespace

ModelBenchmarkResult run_model_benchmark(const ModelBenchmarkOptions& o) {
  if (o.amp != "none" && o.amp != "bf16") throw UsageError("--amp must be none or bf16, got '" + o.amp + "'");
  ModelBenchmarkResult r;
  r.options = o;
  if (o.malloc_cache) runtime::enable_malloc_cache();
  r.threads = static_cast<int>(runtime::configure_cpu_threads(o.threads));
  CpuMemoryTracker::install();

  config::AttentionSpec spec = config::load_attention_config(o.attn_cfg, o.overrides).spec;
  r.config = spec.source;

  models::ModelOptions mo;
  mo.img_size = o.input_size;
  mo.patch_size = o.patch_size;
  mo.embed_dim = o.embed_dim;
  mo.depth = o.depth;
  mo.num_heads = o.num_heads;
  const models::ModelShape& shape = models::find_model_shape(o.model);
  models::ModelOptions dense_options = mo;
  models::ModelOptions sparse_options = mo;
  sparse_options.attention = spec;
  const models::VitConfig dense_config = models::vit_config(shape, dense_options);
  r.tokens = dense_config.num_tokens();

  const int64_t B = o.batch;
  at::manual_seed(static_cast<int64_t>(o.seed));
  const at::Tensor images = at::randn({B, dense_config.in_chans, dense_config.img_size, dense_config.img_size});
  const at::Tensor labels = at::randint(0, dense_config.num_classes, {B}, at::TensorOptions().dtype(at::kLong));

  // Dense attention keeps ~3 [B, H, N, N] float32 buffers per layer alive in a training step
  // (scores, probabilities, their gradients), one layer's at a time in inference.
  const double nn_bytes = static_cast<double>(B) * dense_config.num_heads * r.tokens * r.tokens * sizeof(float);
  const double dense_estimate = nn_bytes * (o.backward ? 2.0 * dense_config.depth + 2.0 : 3.0);
  const bool run_dense = dense_estimate <= o.max_dense_gib * 1024.0 * 1024 * 1024;

  r.dense.name = "dense";
  r.dense.attention = "dense";
  r.sparse.name = "sparse";
  r.sparse.attention = spec.source;
  std::vector<Bench> benches;
  auto add = [&](ModelTiming& timing, const models::ModelOptions& options) {
    at::manual_seed(static_cast<int64_t>(o.seed));
    Bench b;
    b.timing = &timing;
    b.model = std::make_shared<models::VisionTransformer>(models::vit_config(shape, options));
    timing.attention_gflops = b.model->attention_gflops_now();
    std::vector<patterns::Pattern> patterns;
    for (auto& p : b.model->layer_patterns())
      if (p) patterns.push_back(std::move(*p));
    timing.pruning_ratio = patterns.empty() ? 0.0 : patterns::pruning_ratio(patterns);
    if (o.backward) {
      train::OptimizerConfig adamw;
      adamw.lr = 1e-4;
      adamw.weight_decay = 0.05;
      b.optimizer = train::make_adamw(*b.model, adamw);
      b.model->train();
    } else {
      b.model->eval();
    }
    r.params = 0;
    for (const auto& p : b.model->parameters()) r.params += p.numel();
    benches.push_back(std::move(b));
  };
  if (run_dense) add(r.dense, dense_options);
  add(r.sparse, sparse_options);

  auto step = [&](Bench& b) {
    if (!o.backward) {
      c10::InferenceMode guard;
      const runtime::AutocastGuard autocast(o.amp == "bf16");
      at::Tensor logits = b.model->forward(images);
      return;
    }
    {
      RECORD_USER_SCOPE("phase:optimizer");
      train::zero_grad_to_none(*b.optimizer);
    }
    at::Tensor loss;
    {
      const runtime::AutocastGuard autocast(o.amp == "bf16");
      loss = at::cross_entropy_loss(b.model->forward(images).to(at::kFloat), labels, {}, at::Reduction::Mean, -100,
                                    0.1);
    }
    loss.backward();
    RECORD_USER_SCOPE("phase:optimizer");
    b.optimizer->step();
  };

  for (int i = 0; i < o.warmup; ++i)
    for (auto& b : benches) step(b);
  for (int i = 0; i < o.repeats; ++i) {
    for (size_t j = 0; j < benches.size(); ++j) {
      // Each timed step follows an untimed step of the same model: steady state, as training
      // runs, not a step that starts in the memory and caches the other model just used.
      Bench& b = benches[(i % 2 == 0) ? j : benches.size() - 1 - j];
      step(b);
      const auto t0 = Clock::now();
      step(b);
      b.times.push_back(seconds_since(t0));
    }
  }
  for (auto& b : benches) {
    ModelTiming& t = *b.timing;
    t.ran = true;
    t.median_ms = median(b.times) * 1e3;
    t.min_ms = *std::min_element(b.times.begin(), b.times.end()) * 1e3;
    for (double x : b.times) t.step_ms.push_back(x * 1e3);
    t.images_per_second = B / (t.median_ms / 1e3);
    t.peak_extra_bytes = measure_peak_extra([&] { step(b); });
  }
  if (o.breakdown) {
    for (auto& b : benches) {
      ModelTiming& t = *b.timing;
      OpProfiler profiler;
      double wall = 0;
      for (int i = 0; i < o.profile_steps; ++i) {
        const auto t0 = Clock::now();
        step(b);
        wall += seconds_since(t0);
      }
      const double steps = std::max(1, o.profile_steps);
      t.profiled_step_seconds = wall / steps;
      double in_ops = 0;
      for (const auto& [name, totals] : profiler.totals()) {
        const double s = totals.self_seconds / steps;
        t.op_seconds[name] += s;
        t.part_seconds[step_part_of_op(name)] += s;
        in_ops += s;
      }
      // Time outside any op: the C++ between ops (module calls, autograd bookkeeping, the
      // optimizer's loop over parameters).
      t.part_seconds["outside_ops"] = std::max(0.0, t.profiled_step_seconds - in_ops);
    }
  }
  return r;
}

namespace {

nlohmann::json timing_json(const ModelTiming& t) {
  nlohmann::json j = {{"attention", t.attention}, {"ran", t.ran}};
  if (!t.ran) return j;
  j["median_ms"] = t.median_ms;
  j["min_ms"] = t.min_ms;
  j["step_ms"] = t.step_ms;
  j["images_per_second"] = t.images_per_second;
  j["peak_extra_bytes"] = t.peak_extra_bytes;
  j["attention_gflops"] = t.attention_gflops;
  j["pruning_ratio"] = t.pruning_ratio;
  if (!t.part_seconds.empty()) {
    j["profiled_step_ms"] = t.profiled_step_seconds * 1e3;
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [part, s] : t.part_seconds) parts[part] = s * 1e3;
    j["parts_ms"] = parts;
    std::vector<std::pair<double, std::string>> ops;
    for (const auto& [name, s] : t.op_seconds) ops.emplace_back(s, name);
    std::sort(ops.rbegin(), ops.rend());
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < ops.size() && i < 25; ++i)
      top.push_back({{"op", ops[i].second}, {"part", step_part_of_op(ops[i].second)}, {"ms", ops[i].first * 1e3}});
    j["top_ops_ms"] = top;
  }
  return j;
}

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

}  // namespace

nlohmann::json ModelBenchmarkResult::to_json() const {
  nlohmann::json j = {{"model", options.model},
                      {"tokens", tokens},
                      {"params", params},
                      {"batch", options.batch},
                      {"pass", options.backward ? "train_step" : "forward"},
                      {"amp", options.amp},
                      {"threads", threads},
                      {"config", config},
                      {"repeats", options.repeats},
                      {"dense", timing_json(dense)},
                      {"sparse", timing_json(sparse)}};
  if (speedup() > 0) j["speedup_vs_dense"] = speedup();
  return j;
}

std::string ModelBenchmarkResult::to_text() const {
  std::string s = fmt::format("{} (N = {}, {:.2f}M params), batch {}, {}, {} thread(s), amp {}, median of {}\n",
                              options.model, tokens, params / 1e6, options.batch,
                              options.backward ? "training step (fwd + loss + bwd + AdamW)" : "inference forward",
                              threads, options.amp, options.repeats);
  s += fmt::format("{:<8} {:>10} {:>10} {:>12} {:>14} {:>9}  {}\n", "model", "ms/step", "images/s", "peak extra",
                   "attn GFLOPs/img", "pruning", "attention");
  for (const ModelTiming* t : {&dense, &sparse}) {
    if (!t->ran) {
      s += fmt::format("{:<8} skipped (N x N buffers over --max-dense-gib)\n", t->name);
      continue;
    }
    s += fmt::format("{:<8} {:>10.1f} {:>10.1f} {:>12} {:>14.5f} {:>9.4f}  {}\n", t->name, t->median_ms,
                     t->images_per_second, mib(t->peak_extra_bytes), t->attention_gflops, t->pruning_ratio,
                     t->attention);
  }
  if (speedup() > 0) s += fmt::format("sparse vs dense: {:.2f}x images/s\n", speedup());
  for (const ModelTiming* t : {&dense, &sparse}) {
    if (t->part_seconds.empty()) continue;
    s += fmt::format("\nstep breakdown, {} ({:.1f} ms per profiled step):\n", t->name, t->profiled_step_seconds * 1e3);
    std::vector<std::pair<double, std::string>> parts;
    for (const auto& [part, sec] : t->part_seconds) parts.emplace_back(sec, part);
    std::sort(parts.rbegin(), parts.rend());
    for (const auto& [sec, part] : parts)
      s += fmt::format("  {:<16} {:>8.1f} ms {:>5.1f}%\n", part, sec * 1e3, 100.0 * sec / t->profiled_step_seconds);
  }
  return s;
}

}  // namespace sparsevit::benchmarks
