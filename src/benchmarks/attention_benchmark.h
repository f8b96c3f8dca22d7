// The attention benchmark behind `sparsevit bench`: LibTorch dense attention, dense masked
// attention and the sparse operator timed side by side in one run (forward, or forward+backward),
// on one layer's pattern of an attention config; then the sparse operator with its prepared
// indices reused (as a model runs it) against prepared on every call (what the reuse saves),
// alternating in a block of their own.
//
// Timing: every repeat runs the methods back to back (so machine noise hits all alike), in an order
// rotated every repeat, each timed run right after an untimed run of the same method (steady
// state: its own data in cache, as a model runs a layer); each is the median of `repeats` after
// `warmup` untimed runs. Forward runs under InferenceMode;
// forward+backward computes dq, dk, dv with torch::autograd::grad.
// Memory: a wrapper around LibTorch's CPU allocator (cpu_memory_tracker.h) measures, for one extra
// untimed run of each method, the peak bytes allocated above what was live before it.
// FLOPs count a multiply-add as 2: forward 4*D per computed (query, key) pair (Q.K and P.V),
// backward 10*D (recomputed Q.K, dO.V, dQ, dK, dV); dense attention computes all N^2 pairs
// (backward 8*D: four matmuls).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::benchmarks {

struct AttentionBenchmarkOptions {
  std::string attn_cfg;                 // "" : the built-in Fibottention default
  std::vector<std::string> overrides;   // NAME=VALUE mask kwargs
  int32_t tokens = 197;
  int32_t heads = 12;
  int32_t head_dim = 64;
  int32_t batch = 8;
  int32_t layers = 12;
  int32_t layer = 0;
  bool no_class_token = false;
  bool backward = false;
  int32_t threads = 0;                  // 0: every core
  int32_t repeats = 10;
  int32_t warmup = 3;
  double max_dense_gib = 8.0;           // skip dense and masked above this estimate
  uint64_t seed = 0;
  bool malloc_cache = true;             // keep freed memory in the process (glibc mallopt)
};

struct MethodTiming {
  std::string name;  // dense | masked | sparse | sparse_unprepared
  bool ran = false;
  double median_ms = 0, min_ms = 0;
  int64_t peak_extra_bytes = 0;
  double gflop = 0;  // per run
  double gflops_per_s() const { return ran && median_ms > 0 ? gflop / (median_ms / 1e3) : 0.0; }
};

struct AttentionBenchmarkResult {
  AttentionBenchmarkOptions options;
  std::string config, mask, kernel_isa;
  int threads = 1;
  int64_t edges = 0;          // computed pairs over the heads, one batch element
  double density = 0, ideal_speedup = 0;
  MethodTiming dense, masked, sparse, sparse_unprepared;
  // The sparse operator with prepared indices, timed alternating with sparse_unprepared in a
  // block of their own (the fair comparison of the two; `sparse` is timed beside dense).
  double sparse_paired_ms = 0;
  double sgemm_gflops_per_s = 0;
  double dense_estimated_bytes = 0;

  nlohmann::json to_json() const;
  std::string to_text() const;  // the table `sparsevit bench` prints
};

// UsageError for configs without a static pattern or a bad layer.
AttentionBenchmarkResult run_attention_benchmark(const AttentionBenchmarkOptions& options);

}  // namespace sparsevit::benchmarks
