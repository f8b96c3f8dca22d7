// Kernel benchmarks: LibTorch dense attention, dense masked attention and the sparse operator on
// a Fibottention pattern (w_min 5, w_max = N/3), N in {197, 577, 1025, 3137}, H = 12, D = 64, B = 1,
// forward and forward+backward. Counters: density, ideal_speedup (1/density), GFLOP/s (a
// multiply-add counts 2; dense counts all N^2 pairs, sparse only the pattern's edges).
//
//   build/sparse_attention_bench --benchmark_filter='/197/' [--threads via SPARSEVIT_BENCH_THREADS]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>
#include <torch/torch.h>

#include <malloc.h>

#include <cstdlib>
#include <map>
#include <string>

#include "ops/masked_attention_reference.h"
#include "ops/sparse_attention.h"
#include "patterns/mask_registry.h"

namespace {

// As `sparsevit bench --malloc-cache` (its default): freed blocks stay in the process, as with any
// caching allocator, instead of every multi-megabyte tensor being a fresh mmap whose page faults
// and zeroing get timed. SPARSEVIT_BENCH_MALLOC_CACHE=0 keeps glibc's defaults.
const bool kMallocCache = [] {
  const char* e = std::getenv("SPARSEVIT_BENCH_MALLOC_CACHE");
  if (e != nullptr && std::string(e) == "0") return false;
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();

constexpr int64_t kHeads = 12, kDim = 64, kBatch = 1;

enum Method { kDense = 0, kMasked = 1, kSparse = 2 };

struct Problem {
  sparsevit::ops::PatternTensors pattern;
  at::Tensor mask, q, k, v, go, qg, kg, vg;
};

const Problem& problem(int64_t N) {
  static std::map<int64_t, Problem> cache;
  auto it = cache.find(N);
  if (it != cache.end()) return it->second;
  sparsevit::patterns::MaskKwargs kw;
  kw.set_scalar("w_min", "5").set_scalar("w_max", std::to_string(N / 3));
  const auto pattern = sparsevit::patterns::build_mask(
      "fibo", sparsevit::patterns::MaskContext{static_cast<int32_t>(N), static_cast<int32_t>(kHeads), 0, 12, 1}, kw);
  Problem p;
  p.pattern = sparsevit::ops::PatternTensors::from_pattern(pattern);
  p.mask = sparsevit::ops::csr_to_dense_mask(p.pattern.row_ptr, p.pattern.col_idx, N);
  at::manual_seed(0);
  p.q = at::randn({kBatch, kHeads, N, kDim});
  p.k = at::randn({kBatch, kHeads, N, kDim});
  p.v = at::randn({kBatch, kHeads, N, kDim});
  p.go = at::randn({kBatch, kHeads, N, kDim});
  p.qg = p.q.detach().requires_grad_(true);
  p.kg = p.k.detach().requires_grad_(true);
  p.vg = p.v.detach().requires_grad_(true);
  return cache.emplace(N, std::move(p)).first->second;
}

at::Tensor attend(Method m, const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const double scale = sparsevit::ops::default_scale(kDim);
  switch (m) {
    case kDense:
      return sparsevit::ops::dense_attention(q, k, v, scale);
    case kMasked:
      return sparsevit::ops::masked_attention(q, k, v, p.mask, scale);
    default:
      return sparsevit::ops::sparse_attention(q, k, v, p.pattern, scale);
  }
}

void BM_Attention(benchmark::State& state) {
  const auto method = static_cast<Method>(state.range(0));
  const int64_t N = state.range(1);
  const bool backward = state.range(2) != 0;
  if (const char* t = std::getenv("SPARSEVIT_BENCH_THREADS")) at::set_num_threads(std::atoi(t));
  const Problem& p = problem(N);
  for (auto _ : state) {
    if (backward) {
      at::Tensor out = attend(method, p, p.qg, p.kg, p.vg);
      auto grads = torch::autograd::grad({out}, {p.qg, p.kg, p.vg}, {p.go});
      benchmark::DoNotOptimize(grads[0].data_ptr());
    } else {
      c10::InferenceMode guard;
      at::Tensor out = attend(method, p, p.q, p.k, p.v);
      benchmark::DoNotOptimize(out.data_ptr());
    }
  }
  const double density = p.pattern.density();
  const double pairs = method == kSparse ? static_cast<double>(p.pattern.total_edges)
                                         : static_cast<double>(kHeads) * static_cast<double>(N) * static_cast<double>(N);
  const double flop_per_pair = (backward ? (method == kSparse ? 14.0 : 12.0) : 4.0) * kDim;
  state.counters["density"] = density;
  state.counters["ideal_speedup"] = 1.0 / density;
  state.counters["threads"] = at::get_num_threads();
  state.counters["GFLOP/s"] = benchmark::Counter(flop_per_pair * pairs * kBatch / 1e9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::string(method == kDense ? "dense" : method == kMasked ? "masked" : "sparse") +
                 (backward ? " fwd+bwd" : " fwd"));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t backward : {0, 1})
    for (int64_t N : {197, 577, 1025, 3137})
      for (int64_t m : {kDense, kMasked, kSparse}) b->Args({m, N, backward});
  b->ArgNames({"method", "N", "backward"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Attention)->Apply(Args);

// ---- structured (diagonal) kernel and packed qkv op, at the model's batch -------------------------
//
// Fibottention (configs/attention/vit_fibottention.yaml: w_min 5, w_max N/3, Wythoff), H 12, D 64,
// B 8, N in {197, 1025}, forward (InferenceMode) and forward+backward (grad w.r.t. the leaf):
//   general     sparse_attention(q, k, v) on contiguous [B, H, N, D], SPARSEVIT_STRUCTURED_KERNEL=0
//   structured  the same call, structured kernel
//   unpacked    the model's old path from qkv [B, N, 3C]: reshape/permute, q, k, v .contiguous(),
//               sparse_attention (general kernel), transpose(1, 2).reshape(B, N, C)
//   packed      sparse_attention_qkv(qkv, ...) (structured kernel): no copies
//   packed_general  sparse_attention_qkv with the general kernel
//   views       sparse_attention on the three strided [B, H, N, D] views of qkv (structured kernel):
//               strided reads, contiguous [B, H, N, D] output
//   copies      only the old path's copies: q, k, v .contiguous() and the output's transpose+reshape
//               (of a [B, H, N, D] tensor standing in for the op's output)
//
//   SPARSEVIT_BENCH_THREADS=2 build/sparse_attention_bench --benchmark_filter=BM_Structured
//     --benchmark_repetitions=7 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//   (one command line)

constexpr int64_t kModelBatch = 8;

enum Variant { kGeneral = 0, kStructured = 1, kUnpacked = 2, kPacked = 3, kPackedGeneral = 4, kViews = 5, kCopies = 6 };

struct ModelProblem {
  sparsevit::ops::PatternTensors pattern;
  at::Tensor q, k, v, go4, qkv, go3;
};

const ModelProblem& model_problem(int64_t N) {
  static std::map<int64_t, ModelProblem> cache;
  auto it = cache.find(N);
  if (it != cache.end()) return it->second;
  sparsevit::patterns::MaskKwargs kw;
  kw.set_scalar("w_min", "5").set_scalar("w_max", std::to_string(N / 3)).set_scalar("schedule", "wythoff");
  sparsevit::patterns::MaskContext ctx;
  ctx.num_tokens = N;
  ctx.num_prefix_tokens = 1;
  ctx.num_heads = kHeads;
  ctx.head_dim = kDim;
  ctx.num_layers = 12;
  ctx.layer = 0;
  const auto pattern = sparsevit::patterns::build_mask("fibo", ctx, kw);
  ModelProblem p;
  p.pattern = sparsevit::ops::PatternTensors::from_pattern(pattern);
  at::manual_seed(0);
  p.qkv = at::randn({kModelBatch, N, 3 * kHeads * kDim});
  p.go3 = at::randn({kModelBatch, N, kHeads * kDim});
  const at::Tensor t = p.qkv.view({kModelBatch, N, 3, kHeads, kDim}).permute({2, 0, 3, 1, 4});
  p.q = t[0].contiguous();
  p.k = t[1].contiguous();
  p.v = t[2].contiguous();
  p.go4 = p.go3.view({kModelBatch, N, kHeads, kDim}).transpose(1, 2).contiguous();
  return cache.emplace(N, std::move(p)).first->second;
}

void BM_Structured(benchmark::State& state) {
  const auto variant = static_cast<Variant>(state.range(0));
  const int64_t N = state.range(1);
  const bool backward = state.range(2) != 0;
  if (const char* t = std::getenv("SPARSEVIT_BENCH_THREADS")) at::set_num_threads(std::atoi(t));
  const bool general = variant == kGeneral || variant == kUnpacked || variant == kPackedGeneral;
  if (general) {
    setenv("SPARSEVIT_STRUCTURED_KERNEL", "0", 1);
  } else {
    unsetenv("SPARSEVIT_STRUCTURED_KERNEL");
  }
  const ModelProblem& p = model_problem(N);
  const double scale = sparsevit::ops::default_scale(kDim);
  const bool from_qkv = variant >= kUnpacked;
  auto run = [&](const at::Tensor& x, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    if (variant == kUnpacked) {
      const at::Tensor t = x.reshape({kModelBatch, N, 3, kHeads, kDim}).permute({2, 0, 3, 1, 4});
      const at::Tensor o = sparsevit::ops::sparse_attention(t[0].contiguous(), t[1].contiguous(), t[2].contiguous(),
                                                            p.pattern, scale);
      return o.transpose(1, 2).reshape({kModelBatch, N, kHeads * kDim});
    }
    if (variant == kViews) {
      const at::Tensor t = x.view({kModelBatch, N, 3, kHeads, kDim}).permute({2, 0, 3, 1, 4});
      return sparsevit::ops::sparse_attention(t[0], t[1], t[2], p.pattern, scale);
    }
    if (variant == kCopies) {
      const at::Tensor t = x.reshape({kModelBatch, N, 3, kHeads, kDim}).permute({2, 0, 3, 1, 4});
      const at::Tensor a = t[0].contiguous(), b = t[1].contiguous(), c = t[2].contiguous();
      benchmark::DoNotOptimize(b.data_ptr());
      benchmark::DoNotOptimize(c.data_ptr());
      return a.transpose(1, 2).reshape({kModelBatch, N, kHeads * kDim});
    }
    if (from_qkv) return sparsevit::ops::sparse_attention_qkv(x, kHeads, p.pattern, scale);
    return sparsevit::ops::sparse_attention(q, k, v, p.pattern, scale);
  };
  for (auto _ : state) {
    if (backward) {
      if (from_qkv) {
        const at::Tensor x = p.qkv.detach().requires_grad_(true);
        const at::Tensor out = run(x, {}, {}, {});
        auto g = torch::autograd::grad({out}, {x}, {p.go3});
        benchmark::DoNotOptimize(g[0].data_ptr());
      } else {
        const at::Tensor q = p.q.detach().requires_grad_(true), k = p.k.detach().requires_grad_(true),
                         v = p.v.detach().requires_grad_(true);
        const at::Tensor out = run({}, q, k, v);
        auto g = torch::autograd::grad({out}, {q, k, v}, {p.go4});
        benchmark::DoNotOptimize(g[0].data_ptr());
      }
    } else {
      c10::InferenceMode guard;
      const at::Tensor out = run(p.qkv, p.q, p.k, p.v);
      benchmark::DoNotOptimize(out.data_ptr());
    }
  }
  unsetenv("SPARSEVIT_STRUCTURED_KERNEL");
  static const char* names[] = {"general", "structured", "unpacked+general", "packed+structured",
                                "packed+general", "views+structured", "copies only"};
  state.counters["density"] = p.pattern.density();
  state.counters["threads"] = at::get_num_threads();
  state.counters["malloc_cache"] = kMallocCache;
  state.SetLabel(std::string(names[variant]) + (backward ? " fwd+bwd" : " fwd"));
}

void StructuredArgs(benchmark::internal::Benchmark* b) {
  for (int64_t N : {197, 1025})
    for (int64_t backward : {0, 1})
      for (int64_t m : {kGeneral, kStructured, kUnpacked, kPacked, kPackedGeneral, kViews, kCopies}) {
        if (backward && m >= kViews) continue;  // forward-only diagnostics
        b->Args({m, N, backward});
      }
  b->ArgNames({"variant", "N", "backward"})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

BENCHMARK(BM_Structured)->Apply(StructuredArgs);

}  // namespace

BENCHMARK_MAIN();
