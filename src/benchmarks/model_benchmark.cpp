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
#include "models/timesformer.h"
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
  std::shared_ptr<models::Classifier> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::vector<double> times;
};

// The video options on an image model, and a temporal config where there is no temporal
// attention: one-line UsageErrors naming the option.
void check_video_options(const ModelBenchmarkOptions& o, const models::ModelShape& shape) {
  if (!shape.is_video()) {
    for (const auto& [given, name] : {std::pair{o.num_frames.has_value(), "--num-frames"},
                                      std::pair{o.attention_type.has_value(), "--attention-type"},
                                      std::pair{!o.temporal_attn_cfg.empty(), "--temporal-attn-cfg"}})
      if (given)
        throw UsageError(std::string(name) + " applies to video models (timesformer_*); " + o.model +
                         " is an image model");
    return;
  }
  if (!o.temporal_attn_cfg.empty() && o.attention_type.value_or("divided_space_time") != "divided_space_time")
    throw UsageError("--temporal-attn-cfg applies to divided_space_time attention only; --attention-type " +
                     *o.attention_type + " has no temporal attention");
}

// Elements of the N x N score buffers one layer's dense attention holds for a batch of one: the
// image's one sequence, or every spatial and temporal sequence of a clip.
double dense_score_elements(const models::Classifier& model, const std::optional<models::VideoAttentionLayout>& video) {
  const models::VitConfig& c = model.config();
  if (!video) {
    const double n = static_cast<double>(c.num_tokens());
    return c.num_heads * n * n;
  }
  const double spatial = static_cast<double>(video->spatial.num_tokens);
  double elements = static_cast<double>(video->spatial_sequences) * spatial * spatial;
  if (video->temporal) {
    const double temporal = static_cast<double>(video->temporal->num_tokens);
    elements += static_cast<double>(video->temporal_sequences) * temporal * temporal;
  }
  return c.num_heads * elements;
}

}  // namespace

ModelBenchmarkResult run_model_benchmark(const ModelBenchmarkOptions& o) {
  if (o.amp != "none" && o.amp != "bf16") throw UsageError("--amp must be none or bf16, got '" + o.amp + "'");
  const models::ModelShape& shape = models::find_model_shape(o.model);
  check_video_options(o, shape);
  ModelBenchmarkResult r;
  r.options = o;
  if (o.malloc_cache) runtime::enable_malloc_cache();
  r.threads = static_cast<int>(runtime::configure_cpu_threads(o.threads));
  CpuMemoryTracker::install();

  config::AttentionSpec spec = config::load_attention_config(o.attn_cfg, o.overrides).spec;
  r.config = spec.source;
  r.spec = spec;
  // "" is the built-in Fibottention to load_attention_config; the temporal attention's default is dense.
  if (!o.temporal_attn_cfg.empty()) r.temporal_spec = config::load_attention_config(o.temporal_attn_cfg).spec;

  models::ModelOptions mo;
  mo.img_size = o.input_size;
  mo.patch_size = o.patch_size;
  mo.embed_dim = o.embed_dim;
  mo.depth = o.depth;
  mo.num_heads = o.num_heads;
  if (o.num_frames && *o.num_frames != 0) mo.num_frames = o.num_frames;
  if (o.attention_type) mo.attention_type = *o.attention_type;
  mo.temporal_attention = r.temporal_spec;
  models::ModelOptions dense_options = mo;
  models::ModelOptions sparse_options = mo;
  sparse_options.attention = spec;

  r.dense.name = "dense";
  r.dense.attention = "dense";
  r.sparse.name = "sparse";
  r.sparse.attention = spec.source;
  std::vector<Bench> benches;
  auto create = [&](ModelTiming& timing, const models::ModelOptions& options) {
    at::manual_seed(static_cast<int64_t>(o.seed));
    Bench b;
    b.timing = &timing;
    b.model = models::create_classifier(o.model, options);
    return b;
  };
  // The sparse model first: its shape and layout size the batch and the dense estimate, and the
  // dense one is built only if it runs (each is seeded alike, so the order changes no weight).
  Bench sparse_bench = create(r.sparse, sparse_options);
  const models::Classifier& sparse_model = *sparse_bench.model;
  if (const auto* video = dynamic_cast<const models::TimeSformer*>(&sparse_model))
    r.video_layout = video->video_config().layout();
  const models::VitConfig& model_config = sparse_model.config();
  r.tokens = r.video_layout ? r.video_layout->spatial.num_tokens : model_config.num_tokens();

  const int64_t B = o.batch;
  at::manual_seed(static_cast<int64_t>(o.seed));
  std::vector<int64_t> input_shape = sparse_model.input_shape();
  input_shape.insert(input_shape.begin(), B);
  const at::Tensor inputs = at::randn(input_shape);
  const at::Tensor labels = at::randint(0, model_config.num_classes, {B}, at::TensorOptions().dtype(at::kLong));

  // Dense attention keeps ~3 [B, H, N, N] float32 buffers per layer alive in a training step
  // (scores, probabilities, their gradients), one layer's at a time in inference.
  const double nn_bytes = static_cast<double>(B) * dense_score_elements(sparse_model, r.video_layout) * sizeof(float);
  const double dense_estimate = nn_bytes * (o.backward ? 2.0 * model_config.depth + 2.0 : 3.0);
  const bool run_dense = dense_estimate <= o.max_dense_gib * 1024.0 * 1024 * 1024;

  auto add = [&](Bench b) {
    ModelTiming& timing = *b.timing;
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
  if (run_dense) add(create(r.dense, dense_options));
  add(std::move(sparse_bench));

  auto step = [&](Bench& b) {
    if (!o.backward) {
      c10::InferenceMode guard;
      const runtime::AutocastGuard autocast(o.amp == "bf16");
      at::Tensor logits = b.model->forward(inputs);
      return;
    }
    {
      RECORD_USER_SCOPE("phase:optimizer");
      train::zero_grad_to_none(*b.optimizer);
    }
    at::Tensor loss;
    {
      const runtime::AutocastGuard autocast(o.amp == "bf16");
      loss = at::cross_entropy_loss(b.model->forward(inputs).to(at::kFloat), labels, {}, at::Reduction::Mean, -100,
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
    t.samples_per_second = B / (t.median_ms / 1e3);
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

nlohmann::json timing_json(const ModelTiming& t, bool video) {
  nlohmann::json j = {{"attention", t.attention}, {"ran", t.ran}};
  if (!t.ran) return j;
  j["median_ms"] = t.median_ms;
  j["min_ms"] = t.min_ms;
  j["step_ms"] = t.step_ms;
  j[video ? "clips_per_second" : "images_per_second"] = t.samples_per_second;
  j["peak_extra_bytes"] = t.peak_extra_bytes;
  if (t.video_gflops) {
    j["spatial_gflops"] = t.video_gflops->spatial;
    j["temporal_gflops"] = t.video_gflops->temporal;
  }
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

double ratio(double sparse, double dense) { return dense > 0 ? sparse / dense : 0.0; }

// The step breakdown of each model that was profiled.
std::string breakdown_text(const ModelTiming& dense, const ModelTiming& sparse) {
  std::string s;
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

std::string pass_name(const ModelBenchmarkOptions& o) {
  return o.backward ? "training step (fwd + loss + bwd + AdamW)" : "inference forward";
}

}  // namespace

nlohmann::json ModelBenchmarkResult::to_json() const {
  const bool video = is_video();
  nlohmann::json j = {{"model", options.model},
                      {"tokens", tokens},
                      {"params", params},
                      {"batch", options.batch},
                      {"pass", options.backward ? "train_step" : "forward"},
                      {"amp", options.amp},
                      {"threads", threads},
                      {"config", config},
                      {"repeats", options.repeats},
                      {"dense", timing_json(dense, video)},
                      {"sparse", timing_json(sparse, video)}};
  if (video) {
    j["num_frames"] = video_layout->num_frames;
    j["attention_type"] = models::video_attention_name(video_layout->type);
    const std::string temporal = options.temporal_attn_cfg.empty() ? "dense" : temporal_spec.source;
    j["temporal_config"] = video_layout->temporal ? temporal : "none";
    j["spatial_sequences"] = video_layout->spatial_sequences;
    j["temporal_sequences"] = video_layout->temporal_sequences;
    if (dense.ran && sparse.ran)
      j["sparse_vs_dense"] = {{"clips_per_second", ratio(sparse.samples_per_second, dense.samples_per_second)},
                              {"attention_gflops", ratio(sparse.attention_gflops, dense.attention_gflops)},
                              {"peak_extra_bytes", ratio(static_cast<double>(sparse.peak_extra_bytes),
                                                         static_cast<double>(dense.peak_extra_bytes))}};
  }
  if (speedup() > 0) j["speedup_vs_dense"] = speedup();
  return j;
}

std::string ModelBenchmarkResult::to_text() const {
  if (is_video()) return video_text();
  std::string s = fmt::format("{} (N = {}, {:.2f}M params), batch {}, {}, {} thread(s), amp {}, median of {}\n",
                              options.model, tokens, params / 1e6, options.batch, pass_name(options), threads,
                              options.amp, options.repeats);
  s += fmt::format("{:<8} {:>10} {:>10} {:>12} {:>14} {:>9}  {}\n", "model", "ms/step", "images/s", "peak extra",
                   "attn GFLOPs/img", "pruning", "attention");
  for (const ModelTiming* t : {&dense, &sparse}) {
    if (!t->ran) {
      s += fmt::format("{:<8} skipped (N x N buffers over --max-dense-gib)\n", t->name);
      continue;
    }
    s += fmt::format("{:<8} {:>10.1f} {:>10.1f} {:>12} {:>14.5f} {:>9.4f}  {}\n", t->name, t->median_ms,
                     t->samples_per_second, mib(t->peak_extra_bytes), t->attention_gflops, t->pruning_ratio,
                     t->attention);
  }
  if (speedup() > 0) s += fmt::format("sparse vs dense: {:.2f}x images/s\n", speedup());
  return s + breakdown_text(dense, sparse);
}

std::string ModelBenchmarkResult::video_text() const {
  const models::VideoAttentionLayout& v = *video_layout;
  std::string temporal = "no temporal attention";
  if (v.temporal)
    temporal = fmt::format("{} temporal of {} tokens, {}", v.temporal_sequences, v.temporal->num_tokens,
                           options.temporal_attn_cfg.empty() ? "dense" : temporal_spec.source);
  std::string s = fmt::format(
      "{} ({} frames, {}: {} spatial sequences of N = {}, {}; {:.2f}M params), batch {} clips, {}, {} thread(s), "
      "amp {}, median of {}\n",
      options.model, v.num_frames, models::video_attention_name(v.type), v.spatial_sequences, tokens, temporal,
      params / 1e6, options.batch, pass_name(options), threads, options.amp, options.repeats);
  s += fmt::format("{:<8} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12} {:>9}  {}\n", "model", "ms/step", "clips/s",
                   "peak extra", "spatial GF", "temporal GF", "attn GF", "pruning", "spatial attention");
  for (const ModelTiming* t : {&dense, &sparse}) {
    if (!t->ran) {
      s += fmt::format("{:<8} skipped (N x N buffers over --max-dense-gib)\n", t->name);
      continue;
    }
    const std::string spatial = t->video_gflops ? fmt::format("{:.5f}", t->video_gflops->spatial) : "-";
    const std::string temporal_gf = t->video_gflops ? fmt::format("{:.5f}", t->video_gflops->temporal) : "-";
    s += fmt::format("{:<8} {:>10.1f} {:>10.1f} {:>12} {:>12} {:>12} {:>12.5f} {:>9.4f}  {}\n", t->name, t->median_ms,
                     t->samples_per_second, mib(t->peak_extra_bytes), spatial, temporal_gf, t->attention_gflops,
                     t->pruning_ratio, t->attention);
  }
  s += "(attention GFLOPs per clip, forward)\n";
  if (dense.ran && sparse.ran)
    s += fmt::format("sparse / dense: {:.2f}x clips/s, {:.3f}x attention GFLOPs, {:.2f}x peak extra memory\n",
                     ratio(sparse.samples_per_second, dense.samples_per_second),
                     ratio(sparse.attention_gflops, dense.attention_gflops),
                     ratio(static_cast<double>(sparse.peak_extra_bytes), static_cast<double>(dense.peak_extra_bytes)));
  return s + breakdown_text(dense, sparse);
}

}  // namespace sparsevit::benchmarks
