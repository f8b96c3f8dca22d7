#include "benchmarks/attention_benchmark.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "benchmarks/cpu_memory_tracker.h"
#include "benchmarks/timing.h"
#include "config/attention_spec.h"
#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/masked_attention_reference.h"
#include "ops/sparse_attention.h"
#include "ops/sparse_attention_inputs.h"
#include "patterns/pattern.h"
#include "runtime/cpu_threads.h"
#include "runtime/malloc_cache.h"
#include "util/errors.h"

namespace sparsevit::benchmarks {
namespace {

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

}  // namespace

AttentionBenchmarkResult run_attention_benchmark(const AttentionBenchmarkOptions& o) {
  if (o.layer < 0 || o.layer >= o.layers)
    throw UsageError(fmt::format("--layer {} out of range [0, {})", o.layer, o.layers));
  config::AttentionSpec spec = config::load_attention_config(o.attn_cfg, o.overrides).spec;
  if (!spec.has_mask()) throw UsageError("bench needs a config with a static mask; " + spec.source + " is dense");
  if (spec.has_dynamic_mask())
    throw UsageError("bench needs a static mask; mask '" + spec.mask + "' in " + spec.source + " is dynamic");
  const int32_t prefix = o.no_class_token ? 0 : 1;
  const auto layers = config::build_layer_patterns(spec, AttentionGeometry{o.tokens, prefix, o.heads, o.head_dim, o.layers});
  if (!layers.at(o.layer)) throw UsageError(fmt::format("layer {} of {} has no static pattern", o.layer, spec.source));
  const patterns::Pattern& pattern = *layers[o.layer];

  // All three methods alike; --no-malloc-cache measures glibc's defaults.
  if (o.malloc_cache) runtime::enable_malloc_cache();
  const int threads = static_cast<int>(runtime::resolve_cpu_threads(o.threads));
  at::set_num_threads(threads);
  CpuMemoryTracker::install();

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
  std::vector<MethodTiming> results(4);
  std::vector<std::function<void()>> runs(4);
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
  // The same call with the prepared-index cache off: the forward checks the indices and the
  // backward checks them again and rebuilds the transpose, as every call did before prepared
  // indices were kept. (Fresh index tensors per call would not do: the backward would reuse the
  // forward's preparation of them.)
  results[3].name = "sparse_unprepared";
  results[3].gflop = results[2].gflop;
  {
    const std::function<void()> sparse_run =
        make_run([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
          return ops::sparse_attention(a, b, c, pt, scale);
        });
    runs[3] = [sparse_run] {
      struct CacheOff {
        CacheOff() { ops::set_prepared_csr_cache_enabled(false); }
        ~CacheOff() { ops::set_prepared_csr_cache_enabled(true); }
      } off;
      sparse_run();
    };
  }
  const std::vector<size_t> active = run_dense ? std::vector<size_t>{0, 1, 2} : std::vector<size_t>{2};

  // Memory (one untimed run each), then warm-up, then interleaved timed repeats.
  for (size_t m : active) results[m].peak_extra_bytes = measure_peak_extra(runs[m]);
  for (int w = 0; w < o.warmup; ++w)
    for (size_t m : active) runs[m]();
  std::vector<std::vector<double>> times(4);
  for (int r = 0; r < o.repeats; ++r) {
    // The order rotates every repeat, and each timed run follows an untimed run of the same
    // method: every method is timed in its steady state, with its own data in cache (as a model
    // runs a layer), not right after another method's N x N buffers evicted it.
    for (size_t i = 0; i < active.size(); ++i) {
      const size_t m = active[(i + static_cast<size_t>(r)) % active.size()];
      runs[m]();
      const auto t0 = std::chrono::steady_clock::now();
      runs[m]();
      times[m].push_back(seconds_since(t0) * 1e3);
    }
  }
  // Prepared vs unprepared indices, alternating in pairs (s u, u s, ...) in a block of their own:
  // next to dense attention's N x N buffers the difference drowns in cache effects.
  results[3].peak_extra_bytes = measure_peak_extra(runs[3]);
  for (int w = 0; w < o.warmup; ++w) runs[3]();
  std::vector<double> paired_prepared;
  for (int r = 0; r < o.repeats; ++r) {
    for (size_t m : r % 2 ? std::vector<size_t>{3, 2} : std::vector<size_t>{2, 3}) {
      const auto t0 = std::chrono::steady_clock::now();
      runs[m]();
      (m == 2 ? paired_prepared : times[3]).push_back(seconds_since(t0) * 1e3);
    }
  }
  results[3].ran = true;
  results[3].median_ms = median(times[3]);
  results[3].min_ms = *std::min_element(times[3].begin(), times[3].end());
  const double paired_prepared_ms = median(paired_prepared);
  for (size_t m : active) {
    results[m].ran = true;
    results[m].median_ms = median(times[m]);
    results[m].min_ms = *std::min_element(times[m].begin(), times[m].end());
  }
  AttentionBenchmarkResult r;
  r.options = o;
  r.config = spec.source;
  r.mask = spec.mask;
  r.kernel_isa = ops::cpu::kernel_table().isa;
  r.threads = threads;
  r.edges = pt.total_edges;
  r.density = density;
  r.ideal_speedup = density > 0 ? 1.0 / density : 0.0;
  r.dense = results[0];
  r.masked = results[1];
  r.sparse = results[2];
  r.sparse_unprepared = results[3];
  r.sparse_paired_ms = paired_prepared_ms;
  r.sgemm_gflops_per_s = sgemm_gflops();
  r.dense_estimated_bytes = dense_estimate;
  return r;
}


nlohmann::json AttentionBenchmarkResult::to_json() const {
  const AttentionBenchmarkOptions& o = options;
  auto ms_or_null = [](const MethodTiming& m) { return m.ran ? nlohmann::json(m.median_ms) : nlohmann::json(); };
  nlohmann::json j;
  j["config"] = config;
  j["mask"] = mask;
  j["layer"] = o.layer;
  j["tokens"] = o.tokens;
  j["heads"] = o.heads;
  j["head_dim"] = o.head_dim;
  j["batch"] = o.batch;
  j["backward"] = o.backward;
  j["threads"] = threads;
  j["repeats"] = o.repeats;
  j["warmup"] = o.warmup;
  j["kernel_isa"] = kernel_isa;
  j["edges"] = edges;
  j["density"] = density;
  j["ideal_speedup"] = ideal_speedup;
  j["dense_ms"] = ms_or_null(dense);
  j["masked_ms"] = ms_or_null(masked);
  j["sparse_ms"] = sparse.median_ms;
  j["sparse_min_ms"] = sparse.min_ms;
  j["sparse_unprepared_ms"] = sparse_unprepared.median_ms;
  j["sparse_paired_ms"] = sparse_paired_ms;
  j["prepared_indices_speedup"] = sparse_paired_ms > 0 ? sparse_unprepared.median_ms / sparse_paired_ms : 0.0;
  j["speedup_vs_dense"] = dense.ran ? nlohmann::json(dense.median_ms / sparse.median_ms) : nlohmann::json();
  j["speedup_vs_masked"] = masked.ran ? nlohmann::json(masked.median_ms / sparse.median_ms) : nlohmann::json();
  j["fraction_of_ideal"] = dense.ran && ideal_speedup > 0
                               ? nlohmann::json(dense.median_ms / sparse.median_ms / ideal_speedup)
                               : nlohmann::json();
  j["sparse_gflops_per_s"] = sparse.gflops_per_s();
  j["dense_gflops_per_s"] = dense.ran ? nlohmann::json(dense.gflops_per_s()) : nlohmann::json();
  j["sgemm_gflops_per_s"] = sgemm_gflops_per_s;
  j["peak_extra_bytes"] = sparse.peak_extra_bytes;
  j["dense_peak_extra_bytes"] = dense.ran ? nlohmann::json(dense.peak_extra_bytes) : nlohmann::json();
  j["masked_peak_extra_bytes"] = masked.ran ? nlohmann::json(masked.peak_extra_bytes) : nlohmann::json();
  j["dense_estimated_bytes"] = dense_estimated_bytes;
  j["dense_skipped"] = !dense.ran;
  j["malloc_cache"] = o.malloc_cache;
  return j;
}

std::string AttentionBenchmarkResult::to_text() const {
  const AttentionBenchmarkOptions& o = options;
  std::string t;
  t += fmt::format("sparsevit bench: mask {} ({}), layer {}, N={} H={} D={} B={}, {}, {} threads, kernel {}\n", mask,
                   config, o.layer, o.tokens, o.heads, o.head_dim, o.batch,
                   o.backward ? "forward+backward" : "forward", threads, kernel_isa);
  t += fmt::format("density {:.4f} ({} edges per batch element), ideal speedup {:.1f}x; median of {} after {} warm-up{}\n",
                   density, edges, ideal_speedup, o.repeats, o.warmup, o.malloc_cache ? "" : ", glibc malloc defaults");
  t += fmt::format("{:<18} {:>11} {:>10} {:>12} {:>16}\n", "method", "time ms", "GFLOP/s", "vs sparse", "peak extra");
  for (const MethodTiming* m : {&dense, &masked, &sparse}) {
    if (!m->ran) {
      t += fmt::format("{:<18} {:>11} {:>10} {:>12} {:>16}\n", m->name, "skipped", "-", "-",
                       "~" + human_bytes(dense_estimated_bytes));
      continue;
    }
    t += fmt::format("{:<18} {:>11.3f} {:>10.1f} {:>11.2f}x {:>16}\n", m->name, m->median_ms, m->gflops_per_s(),
                     m->median_ms / sparse.median_ms, human_bytes(static_cast<double>(m->peak_extra_bytes)));
  }
  if (dense.ran) {
    t += fmt::format("speedup vs dense {:.2f}x = {:.2f} of ideal; ", dense.median_ms / sparse.median_ms,
                     dense.median_ms / sparse.median_ms / ideal_speedup);
  } else {
    t += fmt::format("dense/masked skipped: they would need ~{} (--max-dense-gib {}); ",
                     human_bytes(dense_estimated_bytes), o.max_dense_gib);
  }
  t += fmt::format("plain sgemm {:.1f} GFLOP/s\n", sgemm_gflops_per_s);
  t += fmt::format("indices prepared once {:.3f} ms vs on every call {:.3f} ms (alternating, no dense in between): "
                   "{:.2f}x\n",
                   sparse_paired_ms, sparse_unprepared.median_ms,
                   sparse_paired_ms > 0 ? sparse_unprepared.median_ms / sparse_paired_ms : 0.0);
  return t;
}

}  // namespace sparsevit::benchmarks
