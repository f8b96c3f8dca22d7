// Problems for the host emulation of the CUDA kernels: per-head patterns (random CSR, or diagonal
// unions with global tokens and their DiagonalPlan), per-token tensors in dense, NaN-padded strided
// and packed-qkv layouts, a float64 reference (forward, lse and the three gradients), and the
// emulated forward / backward driven through the kernels' argument structs. No LibTorch.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ops/cuda/diagonal_tile_plan.h"
#include "ops/cuda/host_emulation.h"

namespace sparsevit::ops::cuda::testing {

// ---- patterns -----------------------------------------------------------------------------------

// Per head and query row, the keys in their listed order; plus, for diagonal patterns, the plan.
struct Pattern {
  int64_t heads = 0, tokens = 0;
  std::vector<std::vector<std::vector<int32_t>>> rows;  // [h][j] -> keys
  // Diagonal unions: per head the signed deltas (ascending) and the global tokens (ascending).
  bool diagonal = false;
  std::vector<std::vector<int32_t>> deltas, globals;
};

// Keys of each row a random subset (density `keep`, in random order), `empty_rows` of them forced empty.
inline Pattern random_pattern(int64_t H, int64_t N, double keep, int64_t empty_rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Pattern p;
  p.heads = H;
  p.tokens = N;
  p.rows.assign(H, std::vector<std::vector<int32_t>>(N));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j < N; ++j) {
      for (int32_t k = 0; k < N; ++k)
        if (u(rng) < keep) p.rows[h][j].push_back(k);
      std::shuffle(p.rows[h][j].begin(), p.rows[h][j].end(), rng);
    }
    for (int64_t e = 0; e < empty_rows; ++e) p.rows[h][(h * 7 + e * 5) % N].clear();
  }
  return p;
}

// Fibottention-like: head h keeps |j - k| in its offsets (a Fibonacci-like set shifted per head)
// plus rows and columns of its global tokens; each CSR row lists its keys in random order.
inline Pattern diagonal_pattern(int64_t H, int64_t N, const std::vector<std::vector<int32_t>>& offsets,
                                const std::vector<std::vector<int32_t>>& globals, uint32_t seed) {
  std::mt19937 rng(seed);
  Pattern p;
  p.heads = H;
  p.tokens = N;
  p.diagonal = true;
  p.rows.assign(H, std::vector<std::vector<int32_t>>(N));
  p.deltas.resize(H);
  p.globals = globals;
  for (int64_t h = 0; h < H; ++h) {
    std::set<int32_t> d;
    for (int32_t o : offsets[h]) {
      d.insert(o);
      d.insert(-o);
    }
    p.deltas[h].assign(d.begin(), d.end());
    std::vector<uint8_t> isg(N, 0);
    for (int32_t g : globals[h]) isg[g] = 1;
    for (int64_t j = 0; j < N; ++j) {
      std::vector<int32_t>& r = p.rows[h][j];
      if (isg[j]) {
        for (int32_t k = 0; k < N; ++k) r.push_back(k);
      } else {
        for (int32_t delta : p.deltas[h]) {
          const int64_t k = j + delta;
          if (k >= 0 && k < N && !isg[k]) r.push_back(static_cast<int32_t>(k));
        }
        for (int32_t g : globals[h]) r.push_back(g);
      }
      std::shuffle(r.begin(), r.end(), rng);
    }
  }
  return p;
}

// The int32 CSR, its transpose and (diagonal patterns) the plan, as the op prepares them; col_idx,
// t_query and t_edge padded past every head's entries with out-of-range garbage (never read).
struct PreparedPattern {
  int64_t nnz_stride = 0, max_slots = 0, max_globals = 0;
  std::vector<int32_t> row_ptr, col_idx, t_row_ptr, t_query, t_edge;
  std::vector<int32_t> delta_ptr, deltas, global_ptr, globals, global_pos;
  std::vector<uint8_t> is_global;

  explicit PreparedPattern(const Pattern& p) {
    const int64_t H = p.heads, N = p.tokens;
    int64_t widest = 0;
    for (const auto& head : p.rows) {
      int64_t n = 0;
      for (const auto& r : head) n += static_cast<int64_t>(r.size());
      widest = std::max(widest, n);
    }
    nnz_stride = widest + 3;
    const int32_t garbage = std::numeric_limits<int32_t>::max() - 7;
    row_ptr.assign(H * (N + 1), 0);
    col_idx.assign(H * nnz_stride, garbage);
    t_row_ptr.assign(H * (N + 1), 0);
    t_query.assign(H * nnz_stride, garbage);
    t_edge.assign(H * nnz_stride, garbage);
    for (int64_t h = 0; h < H; ++h) {
      int32_t e = 0;
      std::vector<std::vector<std::pair<int32_t, int32_t>>> by_key(N);  // (query, edge)
      for (int64_t j = 0; j < N; ++j) {
        row_ptr[h * (N + 1) + j] = e;
        for (int32_t k : p.rows[h][j]) {
          col_idx[h * nnz_stride + e] = k;
          by_key[k].push_back({static_cast<int32_t>(j), e});
          ++e;
        }
      }
      row_ptr[h * (N + 1) + N] = e;
      int32_t t = 0;
      for (int64_t k = 0; k < N; ++k) {
        t_row_ptr[h * (N + 1) + k] = t;
        for (const auto& qe : by_key[k]) {  // queries ascend: rows were visited in order
          t_query[h * nnz_stride + t] = qe.first;
          t_edge[h * nnz_stride + t] = qe.second;
          ++t;
        }
      }
      t_row_ptr[h * (N + 1) + N] = t;
    }
    if (!p.diagonal) return;
    delta_ptr.push_back(0);
    global_ptr.push_back(0);
    is_global.assign(H * N, 0);
    for (int64_t h = 0; h < H; ++h) {
      deltas.insert(deltas.end(), p.deltas[h].begin(), p.deltas[h].end());
      globals.insert(globals.end(), p.globals[h].begin(), p.globals[h].end());
      delta_ptr.push_back(static_cast<int32_t>(deltas.size()));
      global_ptr.push_back(static_cast<int32_t>(globals.size()));
      for (int32_t g : p.globals[h]) is_global[h * N + g] = 1;
      max_slots = std::max<int64_t>(max_slots, p.deltas[h].size() + p.globals[h].size());
      max_globals = std::max<int64_t>(max_globals, p.globals[h].size());
    }
    global_pos.assign(globals.size() * N, garbage);
    for (int64_t h = 0; h < H; ++h)
      for (size_t i = 0; i < p.globals[h].size(); ++i) {
        const int32_t g = p.globals[h][i];
        const int32_t start = row_ptr[h * (N + 1) + g];
        for (int32_t t = start; t < row_ptr[h * (N + 1) + g + 1]; ++t)
          global_pos[(global_ptr[h] + i) * N + col_idx[h * nnz_stride + t]] = t;
      }
  }

  template <typename T>
  void fill(PatternArgs<T>& a, const Pattern& p) const {
    a.row_ptr = row_ptr.data();
    a.col_idx = col_idx.data();
    a.heads = p.heads;
    a.tokens = p.tokens;
    a.nnz_stride = nnz_stride;
    if (p.diagonal) {
      a.diag.delta_ptr = delta_ptr.data();
      a.diag.deltas = deltas.data();
      a.diag.global_ptr = global_ptr.data();
      a.diag.globals = globals.data();
      a.diag.is_global = is_global.data();
      a.diag.global_pos = global_pos.data();
    }
  }
};

// ---- per-token tensors ----------------------------------------------------------------------------

template <typename S>
S to_storage(double x);
template <>
inline float to_storage<float>(double x) {
  return static_cast<float>(x);
}
template <>
inline double to_storage<double>(double x) {
  return x;
}
template <>
inline BFloat16Bits to_storage<BFloat16Bits>(double x) {
  return float_to_bf16(static_cast<float>(x));
}
inline double from_storage(float s) { return s; }
inline double from_storage(double s) { return s; }
inline double from_storage(BFloat16Bits s) { return bf16_to_float(s); }

// kPadded: NaN around every row, head and batch, strides and offset even (pair accesses still
// aligned when D is even); kPaddedOdd: odd strides (element-by-element accesses).
enum class Layout { kDense, kPadded, kPaddedOdd };

// A [B, H, N, D] tensor in storage S inside a buffer, dense or padded with NaN. `view` addresses
// it; values() reads the described elements back as doubles.
template <typename S>
struct TokenBuffer {
  std::shared_ptr<std::vector<S>> mem;
  TokenView<S> view;
  int64_t B = 0, H = 0, N = 0, D = 0;

  TokenBuffer() = default;
  TokenBuffer(int64_t b, int64_t h, int64_t n, int64_t d, Layout layout) : B(b), H(h), N(n), D(d) {
    const bool padded = layout != Layout::kDense;
    const int64_t odd = layout == Layout::kPaddedOdd ? 1 : 0;
    const int64_t sn = padded ? d + 2 + odd : d;
    const int64_t sh = padded ? n * sn + 4 + odd : n * sn;
    const int64_t sb = padded ? h * sh + 6 + odd : h * sh;
    const int64_t offset = padded ? 4 : 0;
    mem = std::make_shared<std::vector<S>>(offset + b * sb + 8, to_storage<S>(std::nan("")));
    view = TokenView<S>{mem->data() + offset, sb, sh, sn};
  }
  // A view into someone else's buffer (packed qkv).
  TokenBuffer(std::shared_ptr<std::vector<S>> m, TokenView<S> v, int64_t b, int64_t h, int64_t n, int64_t d)
      : mem(std::move(m)), view(v), B(b), H(h), N(n), D(d) {}

  S& at(int64_t b, int64_t h, int64_t j, int64_t d) {
    return view.data[b * view.stride_b + h * view.stride_h + j * view.stride_n + d];
  }
  void set(const std::vector<double>& x) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < N; ++j)
          for (int64_t d = 0; d < D; ++d) at(b, h, j, d) = to_storage<S>(x[((b * H + h) * N + j) * D + d]);
  }
  std::vector<double> values() {
    std::vector<double> x(B * H * N * D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < N; ++j)
          for (int64_t d = 0; d < D; ++d) x[((b * H + h) * N + j) * D + d] = from_storage(at(b, h, j, d));
    return x;
  }
  TokenView<const S> cview() const { return {view.data, view.stride_b, view.stride_h, view.stride_n}; }
  // The elements outside the described ones that are not NaN (a padded output must stay NaN there).
  int64_t touched_padding() const {
    std::vector<uint8_t> described(mem->size(), 0);
    const int64_t base = view.data - mem->data();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < N; ++j)
          for (int64_t d = 0; d < D; ++d)
            described[base + b * view.stride_b + h * view.stride_h + j * view.stride_n + d] = 1;
    int64_t n = 0;
    for (size_t i = 0; i < mem->size(); ++i)
      if (!described[i] && !std::isnan(from_storage((*mem)[i]))) ++n;
    return n;
  }
};

// q, k, v as three views of one [B, N, 3, H, D] buffer (timm's qkv layout).
template <typename S>
struct PackedQkv {
  TokenBuffer<S> q, k, v;
  PackedQkv(int64_t B, int64_t H, int64_t N, int64_t D) {
    auto mem = std::make_shared<std::vector<S>>(B * N * 3 * H * D, to_storage<S>(std::nan("")));
    const int64_t sn = 3 * H * D, sh = D, sb = N * sn;
    q = TokenBuffer<S>(mem, TokenView<S>{mem->data(), sb, sh, sn}, B, H, N, D);
    k = TokenBuffer<S>(mem, TokenView<S>{mem->data() + H * D, sb, sh, sn}, B, H, N, D);
    v = TokenBuffer<S>(mem, TokenView<S>{mem->data() + 2 * H * D, sb, sh, sn}, B, H, N, D);
  }
};

inline std::vector<double> random_values(int64_t n, uint32_t seed, double amplitude = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0, amplitude);
  std::vector<double> x(n);
  for (double& v : x) v = d(rng);
  return x;
}

// ---- the float64 reference --------------------------------------------------------------------------

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

// out = softmax over each row's keys of scale q.k, times v; lse; and the gradients for grad_out g
// (P, dP = g.v, Di = sum P dP, dS = P (dP - Di), dq = scale dS k, dk = scale dS^T q, dv = P^T g).
inline Reference reference(const Pattern& p, int64_t B, int64_t D, const std::vector<double>& q,
                           const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& g,
                           double scale) {
  const int64_t H = p.heads, N = p.tokens;
  Reference r;
  r.out.assign(B * H * N * D, 0);
  r.lse.assign(B * H * N, -std::numeric_limits<double>::infinity());
  r.dq.assign(B * H * N * D, 0);
  r.dk.assign(B * H * N * D, 0);
  r.dv.assign(B * H * N * D, 0);
  auto row = [&](const std::vector<double>& x, int64_t bh, int64_t j) { return &x[(bh * N + j) * D]; };
  auto dot = [&](const double* a, const double* b) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += a[d] * b[d];
    return s;
  };
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t h = bh % H;
    for (int64_t j = 0; j < N; ++j) {
      const std::vector<int32_t>& keys = p.rows[h][j];
      if (keys.empty()) continue;
      std::vector<double> s(keys.size()), pr(keys.size()), dp(keys.size());
      double m = -std::numeric_limits<double>::infinity(), l = 0;
      for (size_t t = 0; t < keys.size(); ++t) {
        s[t] = scale * dot(row(q, bh, j), row(k, bh, keys[t]));
        m = std::max(m, s[t]);
      }
      for (size_t t = 0; t < keys.size(); ++t) l += std::exp(s[t] - m);
      r.lse[bh * N + j] = m + std::log(l);
      double di = 0;
      for (size_t t = 0; t < keys.size(); ++t) {
        pr[t] = std::exp(s[t] - m) / l;
        dp[t] = dot(row(g, bh, j), row(v, bh, keys[t]));
        di += pr[t] * dp[t];
        for (int64_t d = 0; d < D; ++d) r.out[(bh * N + j) * D + d] += pr[t] * row(v, bh, keys[t])[d];
      }
      for (size_t t = 0; t < keys.size(); ++t) {
        const double ds = pr[t] * (dp[t] - di);
        for (int64_t d = 0; d < D; ++d) {
          r.dq[(bh * N + j) * D + d] += scale * ds * row(k, bh, keys[t])[d];
          r.dk[(bh * N + keys[t]) * D + d] += scale * ds * row(q, bh, j)[d];
          r.dv[(bh * N + keys[t]) * D + d] += pr[t] * row(g, bh, j)[d];
        }
      }
    }
  }
  return r;
}

// max |got - want| / max(|want|, floor): a tensor-wide relative error (rows near 0 do not divide).
inline double relative_error(const std::vector<double>& got, const std::vector<double>& want, double floor = 1e-30) {
  double worst = 0, scale = floor;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::isfinite(want[i])) scale = std::max(scale, std::abs(want[i]));
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i]) && got[i] == want[i]) continue;
    const double e = std::abs(got[i] - want[i]);
    if (!(e <= worst)) worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
  }
  return worst / scale;
}

// ---- running the emulation --------------------------------------------------------------------------

// One problem: a pattern, B, D, inputs (q, k, v, grad_out) in storage S and the layouts to use.
template <typename T, typename S>
struct EmulatedRun {
  TokenBuffer<S> q, k, v, out, g, dq, dk, dv;
  std::vector<T> lse, edge_p, edge_ds, slot_p, slot_ds, partials, workspace;
  std::vector<double> out_vals, lse_vals, dq_vals, dk_vals, dv_vals;
  KernelDesign design = KernelDesign::kTiles;
  MemoryTraffic forward_traffic, backward_traffic;
  // The same launches counted without running them (count_*_traffic), for comparison.
  MemoryTraffic forward_counted, backward_counted;

  // Runs forward (and backward when `backward`) over inputs already set in q, k, v, g.
  void run(const Pattern& p, const PreparedPattern& pp, int64_t B, int64_t D, double scale, bool diagonal,
           bool backward, Layout out_layout) {
    const int64_t H = p.heads, N = p.tokens;
    out = TokenBuffer<S>(B, H, N, D, out_layout);
    lse.assign(B * H * N, T(7));
    ForwardArgs<T, S> fa;
    pp.fill(fa, p);
    fa.batch = B;
    fa.dim = D;
    fa.scale = static_cast<T>(scale);
    fa.q = q.cview();
    fa.k = k.cview();
    fa.v = v.cview();
    fa.out = out.view;
    fa.lse = lse.data();
    fa.pair_loads = q.view.pairs_aligned() && k.view.pairs_aligned() && v.view.pairs_aligned() &&
                    out.view.pairs_aligned();
    // NaN-filled workspaces: a partial read before it is written surfaces in the outputs.
    fa.partial_stride = forward_partials_per_head<T>(N, D, pp.max_globals);
    partials.assign(B * H * fa.partial_stride + 1, std::numeric_limits<T>::quiet_NaN());
    fa.partials = partials.data();
    forward_traffic = emulate_forward(fa, diagonal, design);
    forward_counted = count_forward_traffic(fa, diagonal, design);
    out_vals = out.values();
    lse_vals.assign(lse.begin(), lse.end());
    if (!backward) return;
    dq = TokenBuffer<S>(B, H, N, D, out_layout);
    dk = TokenBuffer<S>(B, H, N, D, out_layout);
    dv = TokenBuffer<S>(B, H, N, D, out_layout);
    edge_p.assign(B * H * pp.nnz_stride, std::numeric_limits<T>::quiet_NaN());
    edge_ds.assign(B * H * pp.nnz_stride, std::numeric_limits<T>::quiet_NaN());
    BackwardArgs<T, S> ba;
    pp.fill(ba, p);
    ba.batch = B;
    ba.dim = D;
    ba.scale = static_cast<T>(scale);
    ba.q = q.cview();
    ba.k = k.cview();
    ba.v = v.cview();
    ba.out = out.cview();
    ba.grad_out = g.cview();
    ba.lse = lse.data();
    ba.grad_q = dq.view;
    ba.grad_k = dk.view;
    ba.grad_v = dv.view;
    ba.edge_p = edge_p.data();
    ba.edge_ds = edge_ds.data();
    ba.t_row_ptr = pp.t_row_ptr.data();
    ba.t_query = pp.t_query.data();
    ba.t_edge = pp.t_edge.data();
    if (diagonal) {
      ba.slot_stride = pp.max_slots * N;
      slot_p.assign(B * H * ba.slot_stride, std::numeric_limits<T>::quiet_NaN());
      slot_ds.assign(B * H * ba.slot_stride, std::numeric_limits<T>::quiet_NaN());
      ba.slot_p = slot_p.data();
      ba.slot_ds = slot_ds.data();
    }
    ba.pair_loads = fa.pair_loads && g.view.pairs_aligned() && dq.view.pairs_aligned() &&
                    dk.view.pairs_aligned() && dv.view.pairs_aligned();
    ba.workspace_stride = backward_workspace_per_head<T>(N, D, pp.max_globals);
    workspace.assign(B * H * ba.workspace_stride + 1, std::numeric_limits<T>::quiet_NaN());
    ba.workspace = workspace.data();
    backward_traffic = emulate_backward(ba, diagonal, design);
    backward_counted = count_backward_traffic(ba, diagonal, design);
    dq_vals = dq.values();
    dk_vals = dk.values();
    dv_vals = dv.values();
  }
};

// Inputs for a problem, stored in S (bfloat16 rounds them: the reference then uses the rounded values).
template <typename T, typename S>
struct Problem {
  Pattern pattern;
  int64_t B = 1, D = 0;
  double scale = 0;
  std::vector<double> q, k, v, g;  // [B, H, N, D] as stored (after rounding to S)

  Problem(Pattern p, int64_t b, int64_t d, uint32_t seed, double amplitude = 1.0)
      : pattern(std::move(p)), B(b), D(d), scale(1.0 / std::sqrt(static_cast<double>(d))) {
    const int64_t n = B * pattern.heads * pattern.tokens * D;
    q = rounded(random_values(n, seed, amplitude));
    k = rounded(random_values(n, seed + 1, amplitude));
    v = rounded(random_values(n, seed + 2));
    g = rounded(random_values(n, seed + 3));
  }
  static std::vector<double> rounded(std::vector<double> x) {
    for (double& e : x) e = from_storage(to_storage<S>(e));
    return x;
  }
  // Runs the emulation with q, k, v, g in `in_layout` (or packed qkv) and outputs in `out_layout`.
  EmulatedRun<T, S> run(bool diagonal, bool backward, Layout in_layout, Layout out_layout, bool packed = false,
                        KernelDesign design = KernelDesign::kTiles) const {
    const int64_t H = pattern.heads, N = pattern.tokens;
    EmulatedRun<T, S> r;
    r.design = design;
    if (packed) {
      PackedQkv<S> qkv(B, H, N, D);
      r.q = qkv.q;
      r.k = qkv.k;
      r.v = qkv.v;
    } else {
      r.q = TokenBuffer<S>(B, H, N, D, in_layout);
      r.k = TokenBuffer<S>(B, H, N, D, in_layout);
      r.v = TokenBuffer<S>(B, H, N, D, in_layout);
    }
    r.g = TokenBuffer<S>(B, H, N, D, in_layout);
    r.q.set(q);
    r.k.set(k);
    r.v.set(v);
    r.g.set(g);
    r.run(pattern, PreparedPattern(pattern), B, D, scale, diagonal, backward, out_layout);
    return r;
  }
  Reference ref() const { return reference(pattern, B, D, q, k, v, g, scale); }
};

// A Fibottention-like pattern: head h keeps offsets {1, 2, 3, 5, 8, ...} scaled and shifted per head
// (at most `max_offsets`), global tokens `globals` in every head (e.g. {0}: a class token).
inline Pattern fibottention_like(int64_t H, int64_t N, const std::vector<int32_t>& globals, uint32_t seed,
                                 int max_offsets = 6) {
  std::vector<std::vector<int32_t>> offsets(H), globs(H, globals);
  for (int64_t h = 0; h < H; ++h) {
    int32_t a = 1 + static_cast<int32_t>(h % 3), b = 2 + static_cast<int32_t>(h);
    if (h % 2 == 0) offsets[h].push_back(0);
    for (int i = 0; i < max_offsets && a < N; ++i) {
      offsets[h].push_back(a);
      const int32_t c = a + b;
      a = b;
      b = c;
    }
  }
  return diagonal_pattern(H, N, offsets, globs, seed);
}

}  // namespace sparsevit::ops::cuda::testing
