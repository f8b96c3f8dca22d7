// `sparsevit bench`: LibTorch dense attention, dense masked attention and the sparse operator
// timed side by side in one run (forward, or forward+backward with --backward), on one layer's
// pattern of an attention config. Prints a table, or one JSON object with --json.
//
// Timing: every repeat runs dense, masked and sparse back to back (so machine noise hits all
// three alike); each column is the median of --repeats after --warmup untimed runs. Forward runs
// under InferenceMode; forward+backward computes dq, dk, dv with torch::autograd::grad.
// Memory: a wrapper around LibTorch's CPU allocator (ops::CpuMemoryTracker) measures, for one
// extra untimed run of each method, the peak bytes allocated above what was live before it:
// outputs, temporaries, autograd buffers and gradients, the sparse operator's workspaces.
// FLOPs count a multiply-add as 2: forward 4*D per computed (query, key) pair (Q.K and P.V),
// backward 10*D (recomputed Q.K, dO.V, dQ, dK, dV); dense attention computes all N^2 pairs
// (backward 8*D: four matmuls).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "config/attention_spec.h"
#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/cpu_memory_tracker.h"
#include "ops/masked_attention_reference.h"
#include "ops/op_memory_stats.h"
#include "ops/sparse_attention.h"
#include "patterns/pattern.h"
#include "util/errors.h"

namespace sparsevit::cli {
namespace {

struct BenchOptions {
  std::string attn_cfg;
  std::vector<std::string> overrides;
  int32_t tokens = 197;
  int32_t heads = 12;
  int32_t head_dim = 64;
  int32_t batch = 8;
  int32_t layers = 12;
  int32_t layer = 0;
  bool no_class_token = false;
  bool backward = false;
  int32_t threads = 0;
  int32_t repeats = 10;
  int32_t warmup = 3;
  double max_dense_gib = 8.0;
  uint64_t seed = 0;
  bool json = false;
  bool malloc_cache = true;
};

struct MethodResult {
  std::string name;
  bool ran = false;
  double median_ms = 0;
  double min_ms = 0;
  int64_t peak_extra_bytes = 0;
  double gflop = 0;  // per run
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Peak bytes above the live baseline while `fn` runs once (results dropped inside fn).
int64_t measure_peak_extra(const std::function<void()>& fn) {
  const int64_t baseline = ops::CpuMemoryTracker::current_bytes();
  ops::CpuMemoryTracker::reset_peak();
  fn();
  return ops::CpuMemoryTracker::peak_bytes() - baseline;
}

// GFLOP/s of a plain float32 sgemm (1024^3) with the same threads: the machine's matmul rate.
double sgemm_gflops() {
  const at::Tensor a = at::randn({1024, 1024}), b = at::randn({1024, 1024});
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor c = at::mm(a, b);
    if (i >= 2) t.push_back(seconds_since(t0));
  }
  return 2.0 * 1024 * 1024 * 1024 / median(t) / 1e9;
}

std::string human_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

void run_bench(const BenchOptions& o) {
  if (o.layer < 0 || o.layer >= o.layers)
    throw UsageError(fmt::format("--layer {} out of range [0, {})", o.layer, o.layers));
  config::AttentionSpec spec =
      o.attn_cfg.empty() ? config::default_attention_spec() : config::load_attention_spec(o.attn_cfg);
  config::apply_mask_kwarg_overrides(spec, o.overrides);
  if (!spec.has_mask()) throw UsageError("bench needs a config with a static mask; " + spec.source + " is dense");
  if (spec.has_dynamic_mask())
    throw UsageError("bench needs a static mask; mask '" + spec.mask + "' in " + spec.source + " is dynamic");
  const int32_t prefix = o.no_class_token ? 0 : 1;
  const auto layers = config::build_layer_patterns(spec, AttentionGeometry{o.tokens, prefix, o.heads, o.head_dim, o.layers});
  if (!layers.at(o.layer)) throw UsageError(fmt::format("layer {} of {} has no static pattern", o.layer, spec.source));
  const patterns::Pattern& pattern = *layers[o.layer];

  if (o.malloc_cache) {
    // Keep freed memory in the process, as a caching allocator would: glibc otherwise returns
    // every large block to the kernel, and each run pays page faults and zeroing for its outputs
    // and temporaries (all three methods alike). --no-malloc-cache measures glibc's defaults.
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  ops::CpuMemoryTracker::install();

  const int64_t B = o.batch, H = o.heads, N = o.tokens, D = o.head_dim;
  const ops::PatternTensors pt = ops::PatternTensors::from_pattern(pattern);
  const double density = pt.density();
  const double edges = static_cast<double>(pt.total_edges);  // over heads, one batch element
  const double scale = ops::default_scale(D);

  at::manual_seed(o.seed);
  const at::Tensor q = at::randn({B, H, N, D}), k = at::randn({B, H, N, D}), v = at::randn({B, H, N, D});
  const at::Tensor go = at::randn({B, H, N, D});
  const at::Tensor qg = q.detach().requires_grad_(true), kg = k.detach().requires_grad_(true),
                   vg = v.detach().requires_grad_(true);

  // Dense and masked peak at ~3.1 [B, H, N, N] float32 buffers (measured with the tracker at
  // N = 577 and 1025, forward and forward+backward alike): scores, scaled scores, probabilities.
  const double dense_scores_bytes = static_cast<double>(B) * H * N * N * sizeof(float);
  const double dense_estimate = dense_scores_bytes * 3.2;
  const bool run_dense = dense_estimate <= o.max_dense_gib * 1024.0 * 1024 * 1024;
  at::Tensor mask;
  if (run_dense) mask = ops::csr_to_dense_mask(pt.row_ptr, pt.col_idx, N);

  using Attn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;
  auto make_run = [&](Attn attn) -> std::function<void()> {
    if (!o.backward) {
      return [&, attn] {
        c10::InferenceMode guard;
        at::Tensor out = attn(q, k, v);
      };
    }
    return [&, attn] {
      at::Tensor out = attn(qg, kg, vg);
      auto grads = torch::autograd::grad({out}, {qg, kg, vg}, {go});
    };
  };
  const double dense_pair_flop = (o.backward ? 12.0 : 4.0) * D;
  const double sparse_pair_flop = (o.backward ? 14.0 : 4.0) * D;
  std::vector<MethodResult> results(3);
  std::vector<std::function<void()>> runs(3);
  results[0].name = "dense";
  results[0].gflop = dense_pair_flop * B * H * N * N / 1e9;
  runs[0] = make_run([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return ops::dense_attention(a, b, c, scale);
  });
  results[1].name = "masked";
  results[1].gflop = dense_pair_flop * B * H * N * N / 1e9;
  runs[1] = make_run([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return ops::masked_attention(a, b, c, mask, scale);
  });
  results[2].name = "sparse";
  results[2].gflop = sparse_pair_flop * B * edges / 1e9;
  runs[2] = make_run([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return ops::sparse_attention(a, b, c, pt, scale);
  });
  const std::vector<size_t> active = run_dense ? std::vector<size_t>{0, 1, 2} : std::vector<size_t>{2};

  // Memory (one untimed run each), then warm-up, then interleaved timed repeats.
  ops::OpMemoryStats workspace;
  for (size_t m : active) {
    if (m == 2) ops::reset_op_memory_stats();
    results[m].peak_extra_bytes = measure_peak_extra(runs[m]);
    if (m == 2) workspace = ops::op_memory_stats();
  }
  for (int w = 0; w < o.warmup; ++w)
    for (size_t m : active) runs[m]();
  std::vector<std::vector<double>> times(3);
  for (int r = 0; r < o.repeats; ++r) {
    for (size_t m : active) {
      const auto t0 = std::chrono::steady_clock::now();
      runs[m]();
      times[m].push_back(seconds_since(t0) * 1e3);
    }
  }
  for (size_t m : active) {
    results[m].ran = true;
    results[m].median_ms = median(times[m]);
    results[m].min_ms = *std::min_element(times[m].begin(), times[m].end());
  }
  const double sgemm = sgemm_gflops();
  const MethodResult& dense = results[0];
  const MethodResult& masked = results[1];
  const MethodResult& sparse = results[2];
  const double ideal = density > 0 ? 1.0 / density : 0.0;
  const std::string isa = ops::cpu::kernel_table().isa;
  auto gflops = [](const MethodResult& r) { return r.ran && r.median_ms > 0 ? r.gflop / (r.median_ms / 1e3) : 0.0; };

  if (o.json) {
    nlohmann::json j;
    j["config"] = spec.source;
    j["mask"] = spec.mask;
    j["layer"] = o.layer;
    j["tokens"] = N;
    j["heads"] = H;
    j["head_dim"] = D;
    j["batch"] = B;
    j["backward"] = o.backward;
    j["threads"] = threads;
    j["repeats"] = o.repeats;
    j["warmup"] = o.warmup;
    j["kernel_isa"] = isa;
    j["edges"] = pt.total_edges;
    j["density"] = density;
    j["ideal_speedup"] = ideal;
    auto ms_or_null = [](const MethodResult& r) { return r.ran ? nlohmann::json(r.median_ms) : nlohmann::json(); };
    j["dense_ms"] = ms_or_null(dense);
    j["masked_ms"] = ms_or_null(masked);
    j["sparse_ms"] = sparse.median_ms;
    j["sparse_min_ms"] = sparse.min_ms;
    j["speedup_vs_dense"] = dense.ran ? nlohmann::json(dense.median_ms / sparse.median_ms) : nlohmann::json();
    j["speedup_vs_masked"] = masked.ran ? nlohmann::json(masked.median_ms / sparse.median_ms) : nlohmann::json();
    j["fraction_of_ideal"] =
        dense.ran && ideal > 0 ? nlohmann::json(dense.median_ms / sparse.median_ms / ideal) : nlohmann::json();
    j["sparse_gflops_per_s"] = gflops(sparse);
    j["dense_gflops_per_s"] = dense.ran ? nlohmann::json(gflops(dense)) : nlohmann::json();
    j["sgemm_gflops_per_s"] = sgemm;
    j["peak_extra_bytes"] = sparse.peak_extra_bytes;
    j["op_workspace_bytes"] = workspace.bytes_allocated;
    j["dense_peak_extra_bytes"] = dense.ran ? nlohmann::json(dense.peak_extra_bytes) : nlohmann::json();
    j["masked_peak_extra_bytes"] = masked.ran ? nlohmann::json(masked.peak_extra_bytes) : nlohmann::json();
    j["dense_estimated_bytes"] = dense_estimate;
    j["dense_skipped"] = !run_dense;
    j["malloc_cache"] = o.malloc_cache;
    std::cout << j.dump() << std::endl;
    return;
  }
  fmt::print("sparsevit bench: mask {} ({}), layer {}, N={} H={} D={} B={}, {}, {} threads, kernel {}\n", spec.mask,
             spec.source, o.layer, N, H, D, B, o.backward ? "forward+backward" : "forward", threads, isa);
  fmt::print("density {:.4f} ({} edges per batch element), ideal speedup {:.1f}x; median of {} after {} warm-up{}\n",
             density, pt.total_edges, ideal, o.repeats, o.warmup, o.malloc_cache ? "" : ", glibc malloc defaults");
  fmt::print("{:<8} {:>11} {:>10} {:>12} {:>16}\n", "method", "time ms", "GFLOP/s", "vs sparse", "peak extra");
  for (const MethodResult& r : results) {
    if (!r.ran) {
      fmt::print("{:<8} {:>11} {:>10} {:>12} {:>16}\n", r.name, "skipped", "-", "-",
                 "~" + human_bytes(dense_estimate));
      continue;
    }
    fmt::print("{:<8} {:>11.3f} {:>10.1f} {:>11.2f}x {:>16}\n", r.name, r.median_ms, gflops(r),
               r.median_ms / sparse.median_ms, human_bytes(static_cast<double>(r.peak_extra_bytes)));
  }
  if (dense.ran)
    fmt::print("speedup vs dense {:.2f}x = {:.2f} of ideal; ", dense.median_ms / sparse.median_ms,
               dense.median_ms / sparse.median_ms / ideal);
  else
    fmt::print("dense/masked skipped: they would need ~{} (--max-dense-gib {}); ", human_bytes(dense_estimate),
               o.max_dense_gib);
  fmt::print("plain sgemm {:.1f} GFLOP/s\n", sgemm);
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Time dense, dense-masked and sparse attention side by side");
  cmd->add_option(option_names("attn-cfg"), o->attn_cfg, "attention config YAML (default: built-in Fibottention)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "override a mask kwarg: NAME=VALUE (repeatable)");
  cmd->add_option(option_names("tokens"), o->tokens, "tokens N, class token included")
      ->default_val(197)->check(CLI::Range(1, 1 << 20));
  cmd->add_option(option_names("heads"), o->heads, "heads H")->default_val(12)->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("head-dim"), o->head_dim, "head dimension D")->default_val(64)->check(CLI::Range(1, 1 << 16));
  cmd->add_option(option_names("batch"), o->batch, "batch size B")->default_val(8)->check(CLI::Range(1, 1 << 20));
  cmd->add_option(option_names("layers"), o->layers, "layers of the model the pattern comes from")
      ->default_val(12)->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("layer"), o->layer, "layer whose pattern is timed (0-based)")->default_val(0);
  cmd->add_flag(option_names("no-class-token"), o->no_class_token, "token 0 is a patch, not a class token");
  cmd->add_flag(option_names("backward"), o->backward, "time forward+backward (dq, dk, dv) instead of forward");
  cmd->add_option(option_names("threads"), o->threads, "CPU threads (0: every core)")
      ->default_val(0)->check(CLI::Range(0, 4096));
  cmd->add_option(option_names("repeats"), o->repeats, "timed repeats (the median is reported)")
      ->default_val(10)->check(CLI::Range(1, 100000));
  cmd->add_option(option_names("warmup"), o->warmup, "untimed warm-up runs")->default_val(3)->check(CLI::Range(0, 100000));
  cmd->add_option(option_names("max-dense-gib"), o->max_dense_gib,
                  "skip dense and masked when their N x N buffers would exceed this")
      ->default_val(8.0)->check(CLI::Range(0.0, 1e6));
  cmd->add_option(option_names("seed"), o->seed, "seed of the random q, k, v")->default_val(0);
  cmd->add_flag("--malloc-cache,--malloc_cache,!--no-malloc-cache,!--no_malloc_cache", o->malloc_cache,
                "keep freed memory in the process (glibc mallopt), as a caching allocator would (default on)");
  cmd->add_flag(option_names("json"), o->json, "print one JSON object instead of the table");
  cmd->callback([o] {
    try {
      run_bench(*o);
    } catch (const c10::Error& e) {
      throw RuntimeError(std::string("bench failed: ") + e.what_without_backtrace());
    }
  });
}

}  // namespace sparsevit::cli
