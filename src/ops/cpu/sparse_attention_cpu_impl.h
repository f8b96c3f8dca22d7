// Sparse attention CPU kernels, written once and compiled per instruction set.
//
// Included only by sparse_attention_cpu_{default,avx2,avx512}.cpp, each of which defines
//   SPARSEVIT_CPU_ISA           the namespace / table name (default_isa, avx2, avx512)
//   SPARSEVIT_CPU_VECTOR_BYTES  the SIMD register width in bytes (16, 32, 64)
// and is compiled with the matching -m flags. Everything here has internal linkage (anonymous
// namespace) and uses no out-of-line standard-library templates, so no function compiled for
// a wider instruction set can leak into code that runs on a CPU without it.
//
// Vectorisation uses GCC/Clang vector extensions: arithmetic on `V<T>` compiles to one SIMD
// instruction per register (xmm/ymm/zmm by ISA). Dot products over D keep W-lane partial sums
// (4 keys at a time, sharing the query loads) and reduce them by halving; the weighted sums
// accumulate 4 value rows per pass over the output row. float32 exp is a vectorised Cephes-style
// polynomial (max error ~2 ulp); float64 uses std::exp (it serves gradcheck and references).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <algorithm>

#include "ops/cpu/sparse_attention_cpu_kernels.h"

#ifndef SPARSEVIT_CPU_ISA
#error "define SPARSEVIT_CPU_ISA before including sparse_attention_cpu_impl.h"
#endif
#ifndef SPARSEVIT_CPU_VECTOR_BYTES
#error "define SPARSEVIT_CPU_VECTOR_BYTES before including sparse_attention_cpu_impl.h"
#endif

#define SV_INLINE inline __attribute__((always_inline))

namespace sparsevit::ops::cpu::SPARSEVIT_CPU_ISA {
namespace {

constexpr int kVectorBytes = SPARSEVIT_CPU_VECTOR_BYTES;

template <typename T, int Bytes>
struct VecType {
  typedef T type __attribute__((vector_size(Bytes)));
};
template <typename T>
using V = typename VecType<T, kVectorBytes>::type;
template <typename T>
constexpr int64_t kLanes = kVectorBytes / static_cast<int>(sizeof(T));

template <typename T>
SV_INLINE V<T> vload(const T* p) {
  V<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename T>
SV_INLINE void vstore(T* p, const V<T>& v) {
  std::memcpy(p, &v, sizeof(v));
}
template <typename T>
SV_INLINE V<T> vsplat(T x) {
  return V<T>{} + x;
}

// ---- storage types ----------------------------------------------------------------------------
//
// The per-token tensors are stored as S and computed in T: S == T (float, double), or S = Bf16
// (the raw bits of a bfloat16, the upper half of a float32) with T = float. Loads widen in
// registers (zero-extend, shift left 16, bit-cast); stores round to nearest even exactly like
// c10::BFloat16 (NaN -> 0x7fc0). Scores, softmax tiles, lse and the P/dS workspaces are T.
using Bf16 = uint16_t;
typedef uint32_t VU32 __attribute__((vector_size(kVectorBytes)));
typedef uint16_t VU16 __attribute__((vector_size(kVectorBytes / 2)));

// One vector of T from S storage.
template <typename T, typename S>
SV_INLINE V<T> vload_s(const S* p) {
  if constexpr (std::is_same_v<S, T>) {
    return vload(p);
  } else {
    static_assert(std::is_same_v<S, Bf16> && std::is_same_v<T, float>, "bf16 storage computes in float");
    VU16 h;
    std::memcpy(&h, p, sizeof(h));
    const VU32 w = __builtin_convertvector(h, VU32) << 16;
    V<float> f;
    std::memcpy(&f, &w, sizeof(f));
    return f;
  }
}
template <typename T, typename S>
SV_INLINE void vstore_s(S* p, const V<T>& v) {
  if constexpr (std::is_same_v<S, T>) {
    vstore(p, v);
  } else {
    static_assert(std::is_same_v<S, Bf16> && std::is_same_v<T, float>, "bf16 storage computes in float");
    VU32 u;
    std::memcpy(&u, &v, sizeof(u));
    VU32 r = (u + (((u >> 16) & 1u) + 0x7fffu)) >> 16;  // round to nearest even
    r = v != v ? VU32{} + 0x7fc0u : r;                   // NaN stays a (quiet) NaN
    const VU16 h = __builtin_convertvector(r, VU16);
    std::memcpy(p, &h, sizeof(h));
  }
}
// Scalar versions.
template <typename T, typename S>
SV_INLINE T load_s(const S* p) {
  if constexpr (std::is_same_v<S, T>) {
    return *p;
  } else {
    const uint32_t w = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &w, sizeof(f));
    return f;
  }
}
template <typename T, typename S>
SV_INLINE void store_s(S* p, T x) {
  if constexpr (std::is_same_v<S, T>) {
    *p = x;
  } else {
    uint32_t u;
    std::memcpy(&u, &x, sizeof(u));
    *p = x != x ? Bf16(0x7fc0) : static_cast<Bf16>((u + (((u >> 16) & 1u) + 0x7fffu)) >> 16);
  }
}

// Horizontal sum by halving the register (zmm -> ymm -> xmm -> ...), all in registers.
template <typename T, int Bytes>
SV_INLINE T hsum_bytes(const typename VecType<T, Bytes>::type& v) {
  constexpr int n = Bytes / static_cast<int>(sizeof(T));
  if constexpr (n == 1) {
    return v[0];
  } else if constexpr (n == 2) {
    return v[0] + v[1];
  } else if constexpr (n == 4) {
    const auto lo = __builtin_shufflevector(v, v, 0, 1);
    const auto hi = __builtin_shufflevector(v, v, 2, 3);
    const auto s = lo + hi;
    return s[0] + s[1];
  } else if constexpr (n == 8) {
    const auto lo = __builtin_shufflevector(v, v, 0, 1, 2, 3);
    const auto hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
    return hsum_bytes<T, Bytes / 2>(lo + hi);
  } else {
    static_assert(n == 16, "vector of 16 lanes at most");
    const auto lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
    const auto hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    return hsum_bytes<T, Bytes / 2>(lo + hi);
  }
}
template <typename T>
SV_INLINE T hsum(const V<T>& v) {
  return hsum_bytes<T, kVectorBytes>(v);
}

template <typename T>
inline void zero_row(T* o, int64_t d) {
  for (int64_t i = 0; i < d; ++i) o[i] = T(0);
}

template <typename T>
inline void scale_row(T* o, T s, int64_t D) {
  int64_t d = 0;
  const V<T> sv = vsplat(s);
  for (; d + kLanes<T> <= D; d += kLanes<T>) vstore(o + d, vload(o + d) * sv);
  for (; d < D; ++d) o[d] *= s;
}

template <typename T>
inline T dot1(const T* x, const T* y, int64_t D) {
  V<T> a{};
  int64_t d = 0;
  for (; d + kLanes<T> <= D; d += kLanes<T>) a += vload(x + d) * vload(y + d);
  T s = hsum<T>(a);
  for (; d < D; ++d) s += x[d] * y[d];
  return s;
}

// res[i] = x . y_i for four rows y_0..y_3 (x loaded once per chunk).
template <typename T>
inline void dot4(const T* x, const T* y0, const T* y1, const T* y2, const T* y3, int64_t D, T* res) {
  V<T> a0{}, a1{}, a2{}, a3{};
  int64_t d = 0;
  for (; d + kLanes<T> <= D; d += kLanes<T>) {
    const V<T> xv = vload(x + d);
    a0 += xv * vload(y0 + d);
    a1 += xv * vload(y1 + d);
    a2 += xv * vload(y2 + d);
    a3 += xv * vload(y3 + d);
  }
  T s0 = hsum<T>(a0), s1 = hsum<T>(a1), s2 = hsum<T>(a2), s3 = hsum<T>(a3);
  for (; d < D; ++d) {
    s0 += x[d] * y0[d];
    s1 += x[d] * y1[d];
    s2 += x[d] * y2[d];
    s3 += x[d] * y3[d];
  }
  res[0] = s0;
  res[1] = s1;
  res[2] = s2;
  res[3] = s3;
}

// o += c * y
template <typename T>
inline void axpy1(T* o, T c, const T* y, int64_t D) {
  const V<T> cv = vsplat(c);
  int64_t d = 0;
  for (; d + kLanes<T> <= D; d += kLanes<T>) vstore(o + d, vload(o + d) + cv * vload(y + d));
  for (; d < D; ++d) o[d] += c * y[d];
}

// o += c0*y0 + c1*y1 + c2*y2 + c3*y3 (one read-modify-write of o per four rows).
template <typename T>
inline void axpy4(T* o, const T* c, const T* y0, const T* y1, const T* y2, const T* y3, int64_t D) {
  const V<T> c0 = vsplat(c[0]), c1 = vsplat(c[1]), c2 = vsplat(c[2]), c3 = vsplat(c[3]);
  int64_t d = 0;
  for (; d + kLanes<T> <= D; d += kLanes<T>) {
    V<T> acc = vload(o + d);
    acc += c0 * vload(y0 + d);
    acc += c1 * vload(y1 + d);
    acc += c2 * vload(y2 + d);
    acc += c3 * vload(y3 + d);
    vstore(o + d, acc);
  }
  for (; d < D; ++d) o[d] += c[0] * y0[d] + c[1] * y1[d] + c[2] * y2[d] + c[3] * y3[d];
}

// o = sum_t c[t] * base[idx[t] * ld]  (o zeroed first), four rows per pass; `idx` indexes `c`
// directly when cidx is null, else c[cidx[t]]. `ld`: the row stride of base.
template <typename T>
inline void gather_weighted_sum(T* o, const T* c, const int32_t* cidx, const int32_t* idx, int64_t n,
                                const T* base, int64_t D, int64_t ld) {
  zero_row(o, D);
  int64_t t = 0;
  T cc[4];
  for (; t + 4 <= n; t += 4) {
    for (int i = 0; i < 4; ++i) cc[i] = cidx ? c[cidx[t + i]] : c[t + i];
    axpy4(o, cc, base + idx[t] * ld, base + idx[t + 1] * ld, base + idx[t + 2] * ld, base + idx[t + 3] * ld, D);
  }
  for (; t < n; ++t) axpy1(o, cidx ? c[cidx[t]] : c[t], base + idx[t] * ld, D);
}

// s[t] = x . base[idx[t] * ld]
template <typename T>
inline void gather_dots(const T* x, const int32_t* idx, int64_t n, const T* base, int64_t D, int64_t ld, T* s) {
  int64_t t = 0;
  for (; t + 4 <= n; t += 4)
    dot4(x, base + idx[t] * ld, base + idx[t + 1] * ld, base + idx[t + 2] * ld, base + idx[t + 3] * ld, D, s + t);
  for (; t < n; ++t) s[t] = dot1(x, base + idx[t] * ld, D);
}

// ---- exp ------------------------------------------------------------------------------------

typedef int32_t VI32 __attribute__((vector_size(kVectorBytes)));

// Cephes expf on a register; returns 0 below -87.3 (no denormals) and propagates NaN.
SV_INLINE V<float> vexp(V<float> x) {
  const V<float> lo = vsplat(-87.33654475f), hi = vsplat(88.0f);
  const VI32 underflow = x < lo;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  V<float> fx = x * 1.44269504088896341f;
  fx += fx < 0.0f ? vsplat(-0.5f) : vsplat(0.5f);
  const VI32 n = __builtin_convertvector(fx, VI32);  // round half away from zero
  const V<float> nf = __builtin_convertvector(n, V<float>);
  V<float> r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  V<float> y = vsplat(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const VI32 bits = (n + 127) << 23;
  V<float> pow2n;
  std::memcpy(&pow2n, &bits, sizeof(pow2n));
  y = y * pow2n;
  return underflow ? vsplat(0.0f) : y;
}

// Cephes logf on a register for x > 0 (normal numbers; max error ~2 ulp). Used for lse = m + log(l)
// with l >= 1, so zeros, denormals and negative inputs never reach it (those lanes are replaced).
SV_INLINE V<float> vlog(V<float> x) {
  VI32 bits;
  std::memcpy(&bits, &x, sizeof(bits));
  VI32 e = ((bits >> 23) & 0xff) - 126;
  bits = (bits & 0x007fffff) | 0x3f000000;  // mantissa in [0.5, 1)
  V<float> m;
  std::memcpy(&m, &bits, sizeof(m));
  const VI32 small = m < 0.707106781186547524f;
  e = small ? e - 1 : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const V<float> z = m * m;
  V<float> y = vsplat(7.0376836292e-2f);
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const V<float> ef = __builtin_convertvector(e, V<float>);
  y += ef * -2.12194440e-4f;
  y -= z * 0.5f;
  return m + y + ef * 0.693359375f;
}

// x[t] = exp(x[t] * a - b) for t < n; returns the sum.
inline float exp_affine_inplace(float* x, int64_t n, float a, float b) {
  constexpr int64_t W = kLanes<float>;
  V<float> acc{};
  int64_t t = 0;
  for (; t + W <= n; t += W) {
    const V<float> e = vexp(vload(x + t) * a - b);
    vstore(x + t, e);
    acc += e;
  }
  if (t < n) {
    float tmp[W];
    for (int64_t i = 0; i < W; ++i) tmp[i] = t + i < n ? x[t + i] * a - b : -std::numeric_limits<float>::infinity();
    const V<float> e = vexp(vload(tmp));
    vstore(tmp, e);
    acc += e;
    for (int64_t i = 0; t + i < n; ++i) x[t + i] = tmp[i];
  }
  return hsum<float>(acc);
}

inline double exp_affine_inplace(double* x, int64_t n, double a, double b) {
  double s = 0;
  for (int64_t t = 0; t < n; ++t) {
    x[t] = std::exp(x[t] * a - b);
    s += x[t];
  }
  return s;
}


// ---- fixed-D row primitives ------------------------------------------------------------------
//
// Dim<kD> carries the head dimension: kD > 0 is a compile-time D that is a multiple of the vector
// width, so a query (or output) row lives in registers across all of a row's keys; kD == 0 is the
// generic runtime-D path (any D, scalar tail).

template <typename T, int kD>
struct FixedRow {
  static constexpr int kW = static_cast<int>(kLanes<T>);
  static constexpr int kC = kD / kW;  // vectors per row
  static_assert(kD % kW == 0 && kC > 0, "fixed D must be a multiple of the vector width");

  V<T> r[kC];
  template <typename S>
  SV_INLINE void load(const S* p) {
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) r[c] = vload_s<T>(p + c * kW);
  }
  SV_INLINE void zero() {
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) r[c] = V<T>{};
  }
  template <typename S>
  SV_INLINE void store(S* p, T s) const {
    const V<T> sv = vsplat(s);
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) vstore_s<T>(p + c * kW, V<T>(r[c] * sv));
  }
  SV_INLINE void add(const FixedRow& o) {
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) r[c] += o.r[c];
  }
  // this . y
  template <typename S>
  SV_INLINE T dot(const S* y) const {
    V<T> a = r[0] * vload_s<T>(y);
#pragma GCC unroll 16
    for (int c = 1; c < kC; ++c) a += r[c] * vload_s<T>(y + c * kW);
    return hsum<T>(a);
  }
  // this += w * y
  template <typename S>
  SV_INLINE void axpy(T w, const S* y) {
    const V<T> wv = vsplat(w);
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) r[c] += wv * vload_s<T>(y + c * kW);
  }
};

// s[t] = x . base[idx[t] * ld] with x held in registers.
template <typename T, int kD, typename S>
inline void fixed_gather_dots(const FixedRow<T, kD>& x, const int32_t* idx, int64_t n, const S* base, int64_t ld,
                              T* s) {
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    const S* y0 = base + static_cast<int64_t>(idx[t]) * ld;
    const S* y1 = base + static_cast<int64_t>(idx[t + 1]) * ld;
    const S* y2 = base + static_cast<int64_t>(idx[t + 2]) * ld;
    const S* y3 = base + static_cast<int64_t>(idx[t + 3]) * ld;
    s[t] = x.dot(y0);
    s[t + 1] = x.dot(y1);
    s[t + 2] = x.dot(y2);
    s[t + 3] = x.dot(y3);
  }
  for (; t < n; ++t) s[t] = x.dot(base + static_cast<int64_t>(idx[t]) * ld);
}

// acc = sum_t c[t or cidx[t]] * base[idx[t] * D]; two accumulator sets (even/odd terms) keep
// twice as many independent FMA chains in flight, combined once at the end.
template <typename T, int kD, typename S>
inline void fixed_gather_weighted_sum(FixedRow<T, kD>& acc, const T* c, const int32_t* cidx, const int32_t* idx,
                                      int64_t n, const S* base, int64_t ld) {
  FixedRow<T, kD> a0, a1;
  a0.zero();
  a1.zero();
  int64_t t = 0;
  for (; t + 2 <= n; t += 2) {
    a0.axpy(cidx ? c[cidx[t]] : c[t], base + static_cast<int64_t>(idx[t]) * ld);
    a1.axpy(cidx ? c[cidx[t + 1]] : c[t + 1], base + static_cast<int64_t>(idx[t + 1]) * ld);
  }
  if (t < n) a0.axpy(cidx ? c[cidx[t]] : c[t], base + static_cast<int64_t>(idx[t]) * ld);
  a0.add(a1);
  acc = a0;
}

// Iterates flat rows [begin, end) as (bh, j, h) without a division per row.
struct RowCursor {
  int64_t r, bh, j, h;
  const int64_t N, H;
  RowCursor(int64_t begin, int64_t tokens, int64_t heads)
      : r(begin), bh(begin / tokens), j(begin - (begin / tokens) * tokens), h((begin / tokens) % heads), N(tokens),
        H(heads) {}
  inline void next() {
    ++r;
    if (++j == N) {
      j = 0;
      ++bh;
      if (++h == H) h = 0;
    }
  }
};

// ---- row-block kernels ------------------------------------------------------------------------
//
// For a compile-time D, rows are processed in blocks of W consecutive query rows (W = vector
// lanes), ELL style: step t takes the t-th key of every row in the block. The W dot products of
// a step are reduced together by a transposing tree (log2 W shuffle+add levels) into one vector
// whose lane r is row r's score, so the softmax (max, exp, sum, log-sum-exp) runs across rows in
// whole registers. Rows shorter than the block's longest row are masked in the steps past their
// end; rows with more than kBlockMaxKeys keys (e.g. a class token's full row) go through the
// per-row kernel instead. Every row's result depends only on that row (the tree sums each lane's
// partials in a fixed order), so blocking never changes the numbers.

constexpr int64_t kBlockMaxKeys = 64;

// Lane permutation of the transposing reduction: input vector i ends in lane kReduceLane[i].
template <int W, int H>
constexpr int reduce_index(int lane, bool second) {
  const int blk = lane / H, within = lane % H;
  return (blk % 2 ? W : 0) + (blk / 2) * 2 * H + (second ? H : 0) + within;
}

template <int W>
struct ReduceLanes {
  int lane_of_input[W];
  constexpr ReduceLanes() : lane_of_input() {
    int key[W][W] = {};  // key[v][l]: which input's partials lane l of vector v holds
    for (int v = 0; v < W; ++v)
      for (int l = 0; l < W; ++l) key[v][l] = v;
    int m = W;
    for (int h = W / 2; h >= 1; h /= 2) {
      for (int i = 0; i < m / 2; ++i) {
        int y[W] = {};
        for (int l = 0; l < W; ++l) {
          const int blk = l / h, within = l % h;
          const int src = blk % 2 ? 2 * i + 1 : 2 * i;
          y[l] = key[src][(blk / 2) * 2 * h + within];
        }
        for (int l = 0; l < W; ++l) key[i][l] = y[l];
      }
      m /= 2;
    }
    for (int l = 0; l < W; ++l) lane_of_input[key[0][l]] = l;
  }
};

template <typename T, int W, int H, int... Is>
SV_INLINE V<T> reduce_pair(const V<T>& a, const V<T>& b, std::integer_sequence<int, Is...>) {
  return __builtin_shufflevector(a, b, reduce_index<W, H>(Is, false)...) +
         __builtin_shufflevector(a, b, reduce_index<W, H>(Is, true)...);
}

template <typename T, int H>
SV_INLINE void reduce_levels(V<T>* x, int m) {
  if constexpr (H >= 1) {
    constexpr int W = static_cast<int>(kLanes<T>);
#pragma GCC unroll 16
    for (int i = 0; i < m / 2; ++i)
      x[i] = reduce_pair<T, W, H>(x[2 * i], x[2 * i + 1], std::make_integer_sequence<int, W>{});
    reduce_levels<T, H / 2>(x, m / 2);
  }
}

// x[i] holds W partial sums of input i; returns the vector of the W totals, input i in lane
// ReduceLanes<W>().lane_of_input[i]. Destroys x.
template <typename T>
SV_INLINE V<T> transpose_reduce(V<T>* x) {
  constexpr int W = static_cast<int>(kLanes<T>);
  if constexpr (W == 1) {
    return x[0];
  } else {
    reduce_levels<T, W / 2>(x, W);
    return x[0];
  }
}

template <typename T>
SV_INLINE V<T> vexp_any(const V<T>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return vexp(x);
  } else {
    V<T> y;
    for (int64_t i = 0; i < kLanes<T>; ++i) y[i] = std::exp(x[i]);
    return y;
  }
}

template <typename T>
using VMask = decltype(V<T>{} < V<T>{});

// The rows of one block: lanes r < n hold rows j0 + r of head h in batch-head bh.
template <typename T>
struct RowBlock {
  static constexpr int W = static_cast<int>(kLanes<T>);
  int64_t bh, j0, h, n;
  int64_t start[W];  // CSR offset of the row's first key
  int64_t len[W];    // keys in the block pass (0 for long or absent rows)
  bool is_long[W];
  int64_t steps;     // max len

  // Lanes of rows past the block get len 0 and point at row j0 (any valid row) when loaded.
  RowBlock(const int32_t* rp, int64_t bh_, int64_t j0_, int64_t h_, int64_t n_) : bh(bh_), j0(j0_), h(h_), n(n_) {
    steps = 0;
    for (int r = 0; r < W; ++r) {
      start[r] = 0;
      len[r] = 0;
      is_long[r] = false;
      if (r < n) {
        start[r] = rp[j0 + r];
        const int64_t l = rp[j0 + r + 1] - start[r];
        is_long[r] = l > kBlockMaxKeys;
        len[r] = is_long[r] ? 0 : l;
        steps = len[r] > steps ? len[r] : steps;
      }
      lens[r] = static_cast<T>(len[r]);
    }
  }
  // Lane r's t-th key, or key 0 (a valid row; its value is masked) past the row's end.
  inline int64_t key(const int32_t* cols, int r, int64_t t) const { return t < len[r] ? cols[start[r] + t] : 0; }
  inline int64_t row(int r) const { return r < n ? j0 + r : j0; }
  V<T> lens;  // len as a vector, for the step masks
  SV_INLINE VMask<T> active(int64_t t) const { return vsplat(static_cast<T>(t)) < lens; }
};

// W dot products xs[lane-row] . ys[lane-key] for step t, as one vector (lane r = row r).
template <typename T, int kD, typename RowPtr, typename KeyPtr>
SV_INLINE V<T> block_dots(RowPtr row_ptr, KeyPtr key_ptr) {
  constexpr int W = static_cast<int>(kLanes<T>);
  constexpr int C = kD / W;
  constexpr ReduceLanes<W> lanes{};
  V<T> acc[W];
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) {
    const int r = lanes.lane_of_input[i];
    const auto* x = row_ptr(r);
    const auto* y = key_ptr(r);
    V<T> a = vload_s<T>(x) * vload_s<T>(y);
#pragma GCC unroll 16
    for (int c = 1; c < C; ++c) a += vload_s<T>(x + c * W) * vload_s<T>(y + c * W);
    acc[i] = a;
  }
  return transpose_reduce<T>(acc);
}

// s[t] = x . base[idx[t] * D] for a long row: W keys per step reduced together by the
// transposing tree (one vector store per W keys), the rest four at a time.
template <typename T, int kD, typename S>
inline void fixed_gather_dots_wide(const FixedRow<T, kD>& x, const int32_t* idx, int64_t n, const S* base,
                                   int64_t ld, T* s) {
  constexpr int W = static_cast<int>(kLanes<T>);
  constexpr int C = kD / W;
  constexpr ReduceLanes<W> lanes{};
  int64_t t = 0;
  for (; t + W <= n; t += W) {
    V<T> acc[W];
#pragma GCC unroll 16
    for (int i = 0; i < W; ++i) {
      const S* y = base + static_cast<int64_t>(idx[t + lanes.lane_of_input[i]]) * ld;
      V<T> a = x.r[0] * vload_s<T>(y);
#pragma GCC unroll 16
      for (int c = 1; c < C; ++c) a += x.r[c] * vload_s<T>(y + c * W);
      acc[i] = a;
    }
    vstore(s + t, transpose_reduce<T>(acc));
  }
  fixed_gather_dots(x, idx + t, n - t, base, ld, s + t);
}

template <typename T, typename S, int kD>
void forward_block(const ForwardParams<T, S>& p, const RowBlock<T>& b, T* scores) {
  constexpr int W = static_cast<int>(kLanes<T>);
  const int64_t N = p.tokens;
  const int64_t H = p.heads;
  const S* qb = p.q.head(b.bh, H);
  const S* kb = p.k.head(b.bh, H);
  const S* vb = p.v.head(b.bh, H);
  S* ob = p.out.head(b.bh, H);
  const int64_t sq = p.q.stride_n, sk = p.k.stride_n, sv = p.v.stride_n, so = p.out.stride_n;
  const int32_t* cols = p.col_idx + b.h * p.nnz_stride;
  alignas(64) T tile[kBlockMaxKeys * W];
  const V<T> ninf = vsplat(-std::numeric_limits<T>::infinity());
  V<T> m = ninf;
  for (int64_t t = 0; t < b.steps; ++t) {
    V<T> s = block_dots<T, kD>([&](int r) { return qb + b.row(r) * sq; },
                               [&](int r) { return kb + b.key(cols, r, t) * sk; });
    s = b.active(t) ? s * p.scale : ninf;
    vstore(tile + t * W, s);
    m = s > m ? s : m;
  }
  const V<T> m_safe = m == ninf ? V<T>{} : m;  // rows without keys: exp(-inf - 0) = 0
  V<T> l{};
  for (int64_t t = 0; t < b.steps; ++t) {
    const V<T> e = vexp_any<T>(vload(tile + t * W) - m_safe);
    vstore(tile + t * W, e);
    l += e;
  }
  alignas(64) T lv[W], lsev[W];
  vstore(lv, l);
  if constexpr (std::is_same_v<T, float>) {
    const V<T> l_safe = l > V<T>{} ? l : vsplat(T(1));  // lanes without keys: overwritten below
    vstore(lsev, m + vlog(l_safe));
  } else {
    for (int r = 0; r < W; ++r) lsev[r] = m[r] + std::log(lv[r]);
  }
  for (int r = 0; r < b.n; ++r) {
    if (b.is_long[r]) continue;
    const int64_t row = b.bh * N + b.j0 + r;
    S* o = ob + (b.j0 + r) * so;
    if (b.len[r] == 0) {
      zero_row(o, kD);
      p.lse[row] = -std::numeric_limits<T>::infinity();
      continue;
    }
    FixedRow<T, kD> a0, a1;
    a0.zero();
    a1.zero();
    const int32_t* keys = cols + b.start[r];
    int64_t t = 0;
    for (; t + 2 <= b.len[r]; t += 2) {
      a0.axpy(tile[t * W + r], vb + static_cast<int64_t>(keys[t]) * sv);
      a1.axpy(tile[(t + 1) * W + r], vb + static_cast<int64_t>(keys[t + 1]) * sv);
    }
    if (t < b.len[r]) a0.axpy(tile[t * W + r], vb + static_cast<int64_t>(keys[t]) * sv);
    a0.add(a1);
    a0.store(o, T(1) / lv[r]);
    p.lse[row] = lsev[r];
  }
  (void)scores;
}

template <typename T, typename S, int kD>
void backward_query_block(const BackwardParams<T, S>& p, const RowBlock<T>& b) {
  constexpr int W = static_cast<int>(kLanes<T>);
  const int64_t N = p.tokens;
  const int64_t base = b.bh * N;
  const int64_t H = p.heads;
  const S* qb = p.q.head(b.bh, H);
  const S* kb = p.k.head(b.bh, H);
  const S* vb = p.v.head(b.bh, H);
  const S* ob = p.out.head(b.bh, H);
  const S* gb = p.grad_out.head(b.bh, H);
  S* dqb = p.grad_q.head(b.bh, H);
  const int64_t sq = p.q.stride_n, sk = p.k.stride_n, sv = p.v.stride_n, so = p.out.stride_n,
                sg = p.grad_out.stride_n, sdq = p.grad_q.stride_n;
  const int32_t* cols = p.col_idx + b.h * p.nnz_stride;
  alignas(64) T ptile[kBlockMaxKeys * W], dstile[kBlockMaxKeys * W];
  alignas(64) T lse_l[W], di_l[W];
  for (int r = 0; r < W; ++r) {
    lse_l[r] = 0;
    di_l[r] = 0;
    if (r < b.n && b.len[r] > 0) {
      lse_l[r] = p.lse[base + b.j0 + r];
      FixedRow<T, kD> g;
      g.load(gb + (b.j0 + r) * sg);
      di_l[r] = g.dot(ob + (b.j0 + r) * so);
    }
  }
  const V<T> lse = vload(lse_l), di = vload(di_l);
  for (int64_t t = 0; t < b.steps; ++t) {
    const V<T> s = block_dots<T, kD>([&](int r) { return qb + b.row(r) * sq; },
                                     [&](int r) { return kb + b.key(cols, r, t) * sk; });
    const V<T> dp = block_dots<T, kD>([&](int r) { return gb + b.row(r) * sg; },
                                      [&](int r) { return vb + b.key(cols, r, t) * sv; });
    const V<T> pr = b.active(t) ? vexp_any<T>(s * p.scale - lse) : V<T>{};
    vstore(ptile + t * W, pr);
    vstore(dstile + t * W, pr * (dp - di));
  }
  for (int r = 0; r < b.n; ++r) {
    if (b.is_long[r]) continue;
    S* dq = dqb + (b.j0 + r) * sdq;
    const int64_t len = b.len[r];
    if (len == 0) {
      zero_row(dq, kD);
      continue;
    }
    T* P = p.edge_p + b.bh * p.nnz_stride + b.start[r];
    T* dS = p.edge_ds + b.bh * p.nnz_stride + b.start[r];
    const int32_t* keys = cols + b.start[r];
    FixedRow<T, kD> a0, a1;
    a0.zero();
    a1.zero();
    int64_t t = 0;
    for (; t + 2 <= len; t += 2) {
      P[t] = ptile[t * W + r];
      P[t + 1] = ptile[(t + 1) * W + r];
      dS[t] = dstile[t * W + r];
      dS[t + 1] = dstile[(t + 1) * W + r];
      a0.axpy(dS[t], kb + static_cast<int64_t>(keys[t]) * sk);
      a1.axpy(dS[t + 1], kb + static_cast<int64_t>(keys[t + 1]) * sk);
    }
    if (t < len) {
      P[t] = ptile[t * W + r];
      dS[t] = dstile[t * W + r];
      a0.axpy(dS[t], kb + static_cast<int64_t>(keys[t]) * sk);
    }
    a0.add(a1);
    a0.store(dq, p.scale);
  }
}

// ---- forward ----------------------------------------------------------------------------------

template <typename T, typename S, int kD>
void forward_rows_impl(const ForwardParams<T, S>& p, int64_t begin, int64_t end, T* scores) {
  const int64_t N = p.tokens, D = kD > 0 ? kD : p.dim;
  for (RowCursor rc(begin, N, p.heads); rc.r < end; rc.next()) {
    const int64_t r = rc.r, bh = rc.bh;
    const int32_t* rp = p.row_ptr + rc.h * (N + 1);
    const int64_t start = rp[rc.j], nk = rp[rc.j + 1] - start;
    S* o = p.out.head(bh, p.heads) + rc.j * p.out.stride_n;
    if (nk == 0) {
      zero_row(o, D);
      p.lse[r] = -std::numeric_limits<T>::infinity();
      continue;
    }
    const int32_t* keys = p.col_idx + rc.h * p.nnz_stride + start;
    const S* kb = p.k.head(bh, p.heads);
    const S* vb = p.v.head(bh, p.heads);
    const S* qj = p.q.head(bh, p.heads) + rc.j * p.q.stride_n;
    if constexpr (kD > 0) {
      FixedRow<T, kD> qr;
      qr.load(qj);
      fixed_gather_dots_wide(qr, keys, nk, kb, p.k.stride_n, scores);
    } else {
      gather_dots(qj, keys, nk, kb, D, p.k.stride_n, scores);
    }
    // Softmax over scale * (q . k): max-subtracted, so logits of any magnitude stay finite.
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t t = 0; t < nk; ++t) {
      scores[t] *= p.scale;
      m = scores[t] > m ? scores[t] : m;
    }
    const T sum = exp_affine_inplace(scores, nk, T(1), m);
    if constexpr (kD > 0) {
      FixedRow<T, kD> acc;
      fixed_gather_weighted_sum(acc, static_cast<const T*>(scores), static_cast<const int32_t*>(nullptr), keys, nk,
                                vb, p.v.stride_n);
      acc.store(o, T(1) / sum);
    } else {
      gather_weighted_sum(o, scores, static_cast<const int32_t*>(nullptr), keys, nk, vb, D, p.v.stride_n);
      scale_row(o, T(1) / sum, D);
    }
    p.lse[r] = m + std::log(sum);
  }
}

// ---- backward -----------------------------------------------------------------------------------

// Per query row j: P_jk = exp(scale * q_j.k_k - lse_j), dP_jk = dO_j.v_k, Di = dO_j.O_j,
// dS_jk = P_jk (dP_jk - Di), dQ_j = scale * sum_k dS_jk k_k. P and dS go to the edge buffers.
template <typename T, typename S, int kD>
void backward_query_rows_impl(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  const int64_t N = p.tokens, D = kD > 0 ? kD : p.dim;
  for (RowCursor rc(begin, N, p.heads); rc.r < end; rc.next()) {
    const int64_t r = rc.r, bh = rc.bh;
    const int32_t* rp = p.row_ptr + rc.h * (N + 1);
    const int64_t start = rp[rc.j], nk = rp[rc.j + 1] - start;
    S* dq = p.grad_q.head(bh, p.heads) + rc.j * p.grad_q.stride_n;
    if (nk == 0) {
      zero_row(dq, D);
      continue;
    }
    const int32_t* keys = p.col_idx + rc.h * p.nnz_stride + start;
    const S* kb = p.k.head(bh, p.heads);
    const S* vb = p.v.head(bh, p.heads);
    const int64_t sk = p.k.stride_n, sv = p.v.stride_n;
    const S* doj = p.grad_out.head(bh, p.heads) + rc.j * p.grad_out.stride_n;
    const S* qj = p.q.head(bh, p.heads) + rc.j * p.q.stride_n;
    const S* oj = p.out.head(bh, p.heads) + rc.j * p.out.stride_n;
    T* P = p.edge_p + bh * p.nnz_stride + start;
    T* dS = p.edge_ds + bh * p.nnz_stride + start;
    T di;
    if constexpr (kD > 0) {
      FixedRow<T, kD> qr, dor;
      qr.load(qj);
      dor.load(doj);
      di = dor.dot(oj);
      fixed_gather_dots_wide(qr, keys, nk, kb, sk, P);
      fixed_gather_dots_wide(dor, keys, nk, vb, sv, dS);
    } else {
      di = dot1(doj, oj, D);
      gather_dots(qj, keys, nk, kb, D, sk, P);
      gather_dots(doj, keys, nk, vb, D, sv, dS);
    }
    exp_affine_inplace(P, nk, p.scale, p.lse[r]);
    for (int64_t t = 0; t < nk; ++t) dS[t] = P[t] * (dS[t] - di);
    if constexpr (kD > 0) {
      FixedRow<T, kD> acc;
      fixed_gather_weighted_sum(acc, static_cast<const T*>(dS), static_cast<const int32_t*>(nullptr), keys, nk, kb,
                                sk);
      acc.store(dq, p.scale);
    } else {
      gather_weighted_sum(dq, static_cast<const T*>(dS), static_cast<const int32_t*>(nullptr), keys, nk, kb, D, sk);
      scale_row(dq, p.scale, D);
    }
  }
}

// Per key k: dV_k = sum_j P_jk dO_j, dK_k = scale * sum_j dS_jk q_j over the transposed CSR,
// queries in increasing order: a fixed order, no atomics, each output row owned by one call.
template <typename T, typename S, int kD>
void backward_key_rows_impl(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  const int64_t N = p.tokens, D = kD > 0 ? kD : p.dim;
  for (RowCursor rc(begin, N, p.heads); rc.r < end; rc.next()) {
    const int64_t bh = rc.bh;
    const int32_t* trp = p.t_row_ptr + rc.h * (N + 1);
    const int64_t start = trp[rc.j], nq = trp[rc.j + 1] - start;
    S* dk = p.grad_k.head(bh, p.heads) + rc.j * p.grad_k.stride_n;
    S* dv = p.grad_v.head(bh, p.heads) + rc.j * p.grad_v.stride_n;
    if (nq == 0) {
      zero_row(dk, D);
      zero_row(dv, D);
      continue;
    }
    const int32_t* queries = p.t_query + rc.h * p.nnz_stride + start;
    const int32_t* edges = p.t_edge + rc.h * p.nnz_stride + start;
    const T* P = p.edge_p + bh * p.nnz_stride;
    const T* dS = p.edge_ds + bh * p.nnz_stride;
    if constexpr (kD > 0) {
      FixedRow<T, kD> acc;
      fixed_gather_weighted_sum(acc, P, edges, queries, nq, p.grad_out.head(bh, p.heads), p.grad_out.stride_n);
      acc.store(dv, T(1));
      fixed_gather_weighted_sum(acc, dS, edges, queries, nq, p.q.head(bh, p.heads), p.q.stride_n);
      acc.store(dk, p.scale);
    } else {
      gather_weighted_sum(dv, P, edges, queries, nq, p.grad_out.head(bh, p.heads), D, p.grad_out.stride_n);
      gather_weighted_sum(dk, dS, edges, queries, nq, p.q.head(bh, p.heads), D, p.q.stride_n);
      scale_row(dk, p.scale, D);
    }
  }
}

// Compile-time D for the common head sizes (when a multiple of the vector width), else generic.
// bf16 storage (S != T) has only the compile-time D (16, 32, 64, 128: multiples of every
// ISA's float lanes); the torch glue converts other D to float32 first and never calls it so.
template <typename T, typename S, template <typename, typename, int> class Kernel, typename... Args>
void dispatch_dim(int64_t dim, Args&&... args) {
  constexpr int64_t W = kLanes<T>;
  if (dim == 64 && 64 % W == 0) return Kernel<T, S, (64 % W == 0) ? 64 : 0>::run(args...);
  if (dim == 32 && 32 % W == 0) return Kernel<T, S, (32 % W == 0) ? 32 : 0>::run(args...);
  if (dim == 128 && 128 % W == 0) return Kernel<T, S, (128 % W == 0) ? 128 : 0>::run(args...);
  if (dim == 16 && 16 % W == 0) return Kernel<T, S, (16 % W == 0) ? 16 : 0>::run(args...);
  if constexpr (std::is_same_v<S, T>) {
    return Kernel<T, S, 0>::run(args...);
  } else {
    __builtin_trap();
  }
}

// Rows [begin, end) as blocks of at most W rows within one batch-head; long rows per row.
template <typename T, typename Block, typename Row>
void for_each_block(int64_t begin, int64_t end, int64_t N, int64_t H, const int32_t* row_ptr, Block&& block,
                    Row&& row) {
  constexpr int64_t W = kLanes<T>;
  int64_t r = begin;
  while (r < end) {
    const int64_t bh = r / N, j0 = r - bh * N, h = bh % H;
    const int64_t n = std::min<int64_t>(std::min<int64_t>(W, N - j0), end - r);
    const RowBlock<T> b(row_ptr + h * (N + 1), bh, j0, h, n);
    block(b);
    for (int i = 0; i < n; ++i)
      if (b.is_long[i]) row(r + i);
    r += n;
  }
}

template <typename T, typename S, int kD>
struct ForwardKernel {
  static void run(const ForwardParams<T, S>& p, int64_t b, int64_t e, T* s) {
    if constexpr (kD > 0) {
      for_each_block<T>(
          b, e, p.tokens, p.heads, p.row_ptr, [&](const RowBlock<T>& blk) { forward_block<T, S, kD>(p, blk, s); },
          [&](int64_t row) { forward_rows_impl<T, S, kD>(p, row, row + 1, s); });
    } else {
      forward_rows_impl<T, S, kD>(p, b, e, s);
    }
  }
};
template <typename T, typename S, int kD>
struct QueryKernel {
  static void run(const BackwardParams<T, S>& p, int64_t b, int64_t e) {
    if constexpr (kD > 0) {
      for_each_block<T>(
          b, e, p.tokens, p.heads, p.row_ptr, [&](const RowBlock<T>& blk) { backward_query_block<T, S, kD>(p, blk); },
          [&](int64_t row) { backward_query_rows_impl<T, S, kD>(p, row, row + 1); });
    } else {
      backward_query_rows_impl<T, S, kD>(p, b, e);
    }
  }
};
template <typename T, typename S, int kD>
struct KeyKernel {
  static void run(const BackwardParams<T, S>& p, int64_t b, int64_t e) { backward_key_rows_impl<T, S, kD>(p, b, e); }
};

template <typename T, typename S>
void forward_rows(const ForwardParams<T, S>& p, int64_t begin, int64_t end, T* scores) {
  dispatch_dim<T, S, ForwardKernel>(p.dim, p, begin, end, scores);
}
template <typename T, typename S>
void backward_query_rows(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  dispatch_dim<T, S, QueryKernel>(p.dim, p, begin, end);
}
template <typename T, typename S>
void backward_key_rows(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  dispatch_dim<T, S, KeyKernel>(p.dim, p, begin, end);
}

// ---- structured (diagonal) kernels --------------------------------------------------------------
//
// For patterns that are unions of diagonals plus global tokens (DiagonalPlan): a block of W
// consecutive query rows j0..j0+W-1 of one (batch, head) takes, at step s, the key j + delta_s of
// every lane -- consecutive rows of K and V, addresses computed, no CSR walk or index loads --
// then one step per global token (the same key for every lane). A lane is masked where j + delta
// leaves [0, N) or hits a global token (whose column has a step of its own). Global query rows
// (full rows) take the general per-row path. The softmax runs across the block's rows in
// registers as in the row-block kernel. The backward's query pass stores P and dS per
// (slot, query) -- slot s of head h is delta_s or a global column -- so the key pass streams along
// the diagonals too: key k gets queries k - delta_s from slot s, global columns all non-global
// queries, and global rows from the general per-edge buffers (CSR position via global_pos). Each
// row's terms are summed in slot order: fixed by the pattern, independent of threads.

struct DiagBlock {
  int64_t bh, h, j0, n;
  const int32_t* deltas;
  int64_t nd;
  const int32_t* globs;
  int64_t ng;
  const uint8_t* isg;
  uint32_t row_ok;  // bit r: lane r is a row of the block and not a global row
  template <typename P>
  DiagBlock(const P& p, int64_t bh_, int64_t j0_, int64_t n_) : bh(bh_), h(bh_ % p.heads), j0(j0_), n(n_) {
    const DiagonalPlan& d = p.diag;
    deltas = d.deltas + d.delta_ptr[h];
    nd = d.delta_ptr[h + 1] - d.delta_ptr[h];
    globs = d.globals + d.global_ptr[h];
    ng = d.global_ptr[h + 1] - d.global_ptr[h];
    isg = d.is_global + h * p.tokens;
    row_ok = 0;
    for (int64_t r = 0; r < n; ++r)
      if (!isg[j0 + r]) row_ok |= 1u << r;
  }
  int64_t steps() const { return nd + ng; }
  // Lanes whose key at step s is an edge: the lanes whose key j0 + r + delta lies in [0, N) are
  // one contiguous range of bits; then the (few) lanes whose key is a global token are cleared.
  uint32_t valid(int64_t s, int64_t N) const {
    if (s >= nd) return row_ok;
    const int64_t delta = deltas[s];
    // (ternaries, not std::min/max: no out-of-line library template in this per-ISA code)
    const int64_t lo = -j0 - delta > 0 ? -j0 - delta : 0, hi = N - j0 - delta < n ? N - j0 - delta : n;
    if (lo >= hi) return 0;
    uint32_t ok = (hi - lo >= 32 ? ~0u : ((1u << (hi - lo)) - 1u)) << lo;
    for (int64_t gi = 0; gi < ng; ++gi) {
      const int64_t r = globs[gi] - j0 - delta;
      if (r >= 0 && r < n) ok &= ~(1u << r);
    }
    return ok & row_ok;
  }
  // Lane r's key at step s when that lane is valid (no clamping needed).
  int64_t valid_key(int64_t s, int r) const { return s < nd ? j0 + r + deltas[s] : globs[s - nd]; }
  // Lane r's key at step s (clamped into [0, N) for masked lanes, so every load is in bounds).
  int64_t key(int64_t s, int r, int64_t N) const {
    if (s >= nd) return globs[s - nd];
    const int64_t k = j0 + r + deltas[s];
    return k < 0 ? 0 : (k >= N ? N - 1 : k);
  }
  int64_t row(int r) const { return r < n ? j0 + r : j0; }
};

// W dot products (rows(r) . key of lane r at step s): a global step reads one key row for every
// lane; a diagonal step whose W keys all lie in [0, N) reads W consecutive rows from one base;
// only a block at the edge of the sequence clamps lane by lane.
template <typename T, int kD, typename RowPtr, typename S>
SV_INLINE V<T> diag_dots(const DiagBlock& b, int64_t s, int64_t N, RowPtr rows, const S* kb, int64_t sk) {
  if (s >= b.nd) {
    const S* y = kb + static_cast<int64_t>(b.globs[s - b.nd]) * sk;
    return block_dots<T, kD>(rows, [&](int) { return y; });
  }
  const int64_t first = b.j0 + b.deltas[s];
  if (first >= 0 && first + kLanes<T> <= N) {
    const S* y = kb + first * sk;
    return block_dots<T, kD>(rows, [&](int r) { return y + r * sk; });
  }
  return block_dots<T, kD>(rows, [&](int r) { return kb + b.key(s, r, N) * sk; });
}

// Lane r set where bit r of `bits` is, in registers (a splat, an AND with the lanes' powers of
// two, a compare): building the mask through memory would stall on store forwarding every step.
template <typename T>
SV_INLINE VMask<T> lane_mask(uint32_t bits) {
  using M = VMask<T>;
  using E = std::remove_cv_t<std::remove_reference_t<decltype(M{}[0])>>;
  constexpr int W = static_cast<int>(kLanes<T>);
  M pow2{};
#pragma GCC unroll 16
  for (int r = 0; r < W; ++r) pow2[r] = static_cast<E>(E(1) << r);
  const M b = M{} + static_cast<E>(bits);
  return (b & pow2) != 0;
}

template <typename T, typename S, int kD>
void forward_diag_block(const ForwardParams<T, S>& p, const DiagBlock& b) {
  constexpr int W = static_cast<int>(kLanes<T>);
  if (b.row_ok == 0) return;
  const int64_t N = p.tokens, H = p.heads;
  const S* qb = p.q.head(b.bh, H);
  const S* kb = p.k.head(b.bh, H);
  const S* vb = p.v.head(b.bh, H);
  S* ob = p.out.head(b.bh, H);
  const int64_t sq = p.q.stride_n, sk = p.k.stride_n, sv = p.v.stride_n, so = p.out.stride_n;
  const int64_t steps = b.steps();
  alignas(64) T tile[kMaxDiagonalSlots * W];
  uint32_t valid[kMaxDiagonalSlots];
  const V<T> ninf = vsplat(-std::numeric_limits<T>::infinity());
  V<T> m = ninf;
  for (int64_t s = 0; s < steps; ++s) {
    valid[s] = b.valid(s, N);
    if (valid[s] == 0) {
      vstore(tile + s * W, ninf);
      continue;
    }
    V<T> x = diag_dots<T, kD>(b, s, N, [&](int r) { return qb + b.row(r) * sq; }, kb, sk);
    x = lane_mask<T>(valid[s]) ? x * p.scale : ninf;
    vstore(tile + s * W, x);
    m = x > m ? x : m;
  }
  const V<T> m_safe = m == ninf ? V<T>{} : m;
  V<T> l{};
  for (int64_t s = 0; s < steps; ++s) {
    const V<T> e = vexp_any<T>(vload(tile + s * W) - m_safe);
    vstore(tile + s * W, e);
    l += e;
  }
  alignas(64) T lv[W], lsev[W];
  vstore(lv, l);
  if constexpr (std::is_same_v<T, float>) {
    const V<T> l_safe = l > V<T>{} ? l : vsplat(T(1));
    vstore(lsev, m + vlog(l_safe));
  } else {
    for (int r = 0; r < W; ++r) lsev[r] = lv[r] > 0 ? m[r] + std::log(lv[r]) : T(0);
  }
  for (int r = 0; r < b.n; ++r) {
    if (!((b.row_ok >> r) & 1u)) continue;
    const int64_t row = b.bh * N + b.j0 + r;
    S* o = ob + (b.j0 + r) * so;
    if (!(lv[r] > 0)) {
      zero_row(o, kD);
      p.lse[row] = -std::numeric_limits<T>::infinity();
      continue;
    }
    FixedRow<T, kD> a0, a1;
    a0.zero();
    a1.zero();
    bool odd = false;
    for (int64_t s = 0; s < steps; ++s) {
      if (!((valid[s] >> r) & 1u)) continue;
      const S* y = vb + b.valid_key(s, r) * sv;
      if (odd) {
        a1.axpy(tile[s * W + r], y);
      } else {
        a0.axpy(tile[s * W + r], y);
      }
      odd = !odd;
    }
    a0.add(a1);
    a0.store(o, T(1) / lv[r]);
    p.lse[row] = lsev[r];
  }
}

template <typename T, typename S, int kD>
void backward_query_diag_block(const BackwardParams<T, S>& p, const DiagBlock& b) {
  constexpr int W = static_cast<int>(kLanes<T>);
  if (b.row_ok == 0) return;
  const int64_t N = p.tokens, H = p.heads;
  const int64_t base = b.bh * N;
  const S* qb = p.q.head(b.bh, H);
  const S* kb = p.k.head(b.bh, H);
  const S* vb = p.v.head(b.bh, H);
  const S* ob = p.out.head(b.bh, H);
  const S* gb = p.grad_out.head(b.bh, H);
  S* dqb = p.grad_q.head(b.bh, H);
  const int64_t sq = p.q.stride_n, sk = p.k.stride_n, sv = p.v.stride_n, so = p.out.stride_n,
                sg = p.grad_out.stride_n, sdq = p.grad_q.stride_n;
  T* slot_p = p.slot_p + b.bh * p.slot_stride;
  T* slot_ds = p.slot_ds + b.bh * p.slot_stride;
  const int64_t steps = b.steps();
  alignas(64) T dstile[kMaxDiagonalSlots * W];
  uint32_t valid[kMaxDiagonalSlots];
  alignas(64) T lse_l[W], di_l[W];
  for (int r = 0; r < W; ++r) {
    lse_l[r] = 0;
    di_l[r] = 0;
    if (r < b.n && ((b.row_ok >> r) & 1u)) {
      lse_l[r] = p.lse[base + b.j0 + r];
      FixedRow<T, kD> g;
      g.load(gb + (b.j0 + r) * sg);
      di_l[r] = g.dot(ob + (b.j0 + r) * so);
    }
  }
  const V<T> lse = vload(lse_l), di = vload(di_l);
  for (int64_t s = 0; s < steps; ++s) {
    valid[s] = b.valid(s, N);
    if (valid[s] == 0) continue;
    const V<T> x = diag_dots<T, kD>(b, s, N, [&](int r) { return qb + b.row(r) * sq; }, kb, sk);
    const V<T> dp = diag_dots<T, kD>(b, s, N, [&](int r) { return gb + b.row(r) * sg; }, vb, sv);
    const V<T> pr = lane_mask<T>(valid[s]) ? vexp_any<T>(x * p.scale - lse) : V<T>{};
    const V<T> ds = pr * (dp - di);
    vstore(dstile + s * W, ds);
    // Slot-major: entry (s, j) at s*N + j. Only this block's n rows are written (a full vector
    // only when the block has W rows, else lane by lane: the next slot's rows belong to others).
    T* ps = slot_p + s * N + b.j0;
    T* dss = slot_ds + s * N + b.j0;
    if (b.n == W) {
      vstore(ps, pr);
      vstore(dss, ds);
    } else {
      for (int r = 0; r < b.n; ++r) {
        ps[r] = pr[r];
        dss[r] = ds[r];
      }
    }
  }
  for (int r = 0; r < b.n; ++r) {
    if (!((b.row_ok >> r) & 1u)) continue;
    FixedRow<T, kD> a0, a1;
    a0.zero();
    a1.zero();
    bool odd = false;
    for (int64_t s = 0; s < steps; ++s) {
      if (!((valid[s] >> r) & 1u)) continue;
      const S* y = kb + b.valid_key(s, r) * sk;
      if (odd) {
        a1.axpy(dstile[s * W + r], y);
      } else {
        a0.axpy(dstile[s * W + r], y);
      }
      odd = !odd;
    }
    a0.add(a1);
    a0.store(dqb + (b.j0 + r) * sdq, p.scale);
  }
}

// Key rows [begin, end): dV_k = sum P_jk dO_j, dK_k = scale sum dS_jk q_j, in slot order, then the
// global query rows in increasing order.
template <typename T, typename S, int kD>
void backward_key_diag_rows(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  const int64_t N = p.tokens, H = p.heads;
  const DiagonalPlan& d = p.diag;
  for (RowCursor rc(begin, N, H); rc.r < end; rc.next()) {
    const int64_t bh = rc.bh, h = rc.h, k = rc.j;
    const int32_t* deltas = d.deltas + d.delta_ptr[h];
    const int64_t nd = d.delta_ptr[h + 1] - d.delta_ptr[h];
    const int32_t* globs = d.globals + d.global_ptr[h];
    const int64_t ng = d.global_ptr[h + 1] - d.global_ptr[h];
    const int32_t* gpos = d.global_pos + static_cast<int64_t>(d.global_ptr[h]) * N;
    const uint8_t* isg = d.is_global + h * N;
    const T* slot_p = p.slot_p + bh * p.slot_stride;
    const T* slot_ds = p.slot_ds + bh * p.slot_stride;
    const S* qb = p.q.head(bh, H);
    const S* gb = p.grad_out.head(bh, H);
    const int64_t sq = p.q.stride_n, sg = p.grad_out.stride_n;
    FixedRow<T, kD> dv, dk;
    dv.zero();
    dk.zero();
    if (!isg[k]) {
      for (int64_t s = 0; s < nd; ++s) {
        const int64_t j = k - deltas[s];
        if (j < 0 || j >= N || isg[j]) continue;
        dv.axpy(slot_p[s * N + j], gb + j * sg);
        dk.axpy(slot_ds[s * N + j], qb + j * sq);
      }
    } else {
      int64_t gi = 0;
      while (globs[gi] != k) ++gi;
      const T* ps = slot_p + (nd + gi) * N;
      const T* dss = slot_ds + (nd + gi) * N;
      for (int64_t j = 0; j < N; ++j) {
        if (isg[j]) continue;
        dv.axpy(ps[j], gb + j * sg);
        dk.axpy(dss[j], qb + j * sq);
      }
    }
    const T* ep = p.edge_p + bh * p.nnz_stride;
    const T* eds = p.edge_ds + bh * p.nnz_stride;
    for (int64_t gi = 0; gi < ng; ++gi) {
      const int64_t g = globs[gi], e = gpos[gi * N + k];
      dv.axpy(ep[e], gb + g * sg);
      dk.axpy(eds[e], qb + g * sq);
    }
    dv.store(p.grad_v.head(bh, H) + k * p.grad_v.stride_n, T(1));
    dk.store(p.grad_k.head(bh, H) + k * p.grad_k.stride_n, p.scale);
  }
}

// Rows [begin, end) as diagonal blocks of at most W rows within one batch-head; global rows per row.
template <typename T, typename P, typename Block, typename Row>
void for_each_diag_block(const P& p, int64_t begin, int64_t end, Block&& block, Row&& row) {
  constexpr int64_t W = kLanes<T>;
  const int64_t N = p.tokens;
  int64_t r = begin;
  while (r < end) {
    const int64_t bh = r / N, j0 = r - bh * N;
    const int64_t rest = N - j0 < end - r ? N - j0 : end - r;
    const int64_t n = W < rest ? W : rest;
    const DiagBlock b(p, bh, j0, n);
    block(b);
    for (int i = 0; i < n; ++i)
      if (!((b.row_ok >> i) & 1u)) row(r + i);
    r += n;
  }
}

template <typename T, typename S, int kD>
struct ForwardDiagKernel {
  static void run(const ForwardParams<T, S>& p, int64_t b, int64_t e, T* s) {
    if constexpr (kD > 0) {
      for_each_diag_block<T>(
          p, b, e, [&](const DiagBlock& blk) { forward_diag_block<T, S, kD>(p, blk); },
          [&](int64_t row) { forward_rows_impl<T, S, kD>(p, row, row + 1, s); });
    } else {
      ForwardKernel<T, S, kD>::run(p, b, e, s);
    }
  }
};
template <typename T, typename S, int kD>
struct QueryDiagKernel {
  static void run(const BackwardParams<T, S>& p, int64_t b, int64_t e) {
    if constexpr (kD > 0) {
      for_each_diag_block<T>(
          p, b, e, [&](const DiagBlock& blk) { backward_query_diag_block<T, S, kD>(p, blk); },
          [&](int64_t row) { backward_query_rows_impl<T, S, kD>(p, row, row + 1); });
    } else {
      QueryKernel<T, S, kD>::run(p, b, e);
    }
  }
};
template <typename T, typename S, int kD>
struct KeyDiagKernel {
  static void run(const BackwardParams<T, S>& p, int64_t b, int64_t e) {
    if constexpr (kD > 0) {
      backward_key_diag_rows<T, S, kD>(p, b, e);
    } else {
      KeyKernel<T, S, kD>::run(p, b, e);
    }
  }
};

template <typename T, typename S>
void forward_rows_diagonal(const ForwardParams<T, S>& p, int64_t begin, int64_t end, T* scores) {
  dispatch_dim<T, S, ForwardDiagKernel>(p.dim, p, begin, end, scores);
}
template <typename T, typename S>
void backward_query_rows_diagonal(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  dispatch_dim<T, S, QueryDiagKernel>(p.dim, p, begin, end);
}
template <typename T, typename S>
void backward_key_rows_diagonal(const BackwardParams<T, S>& p, int64_t begin, int64_t end) {
  dispatch_dim<T, S, KeyDiagKernel>(p.dim, p, begin, end);
}

}  // namespace

#define SPARSEVIT_CPU_STR2(x) #x
#define SPARSEVIT_CPU_STR(x) SPARSEVIT_CPU_STR2(x)

const KernelTable& table() {
  static const KernelTable t{
      SPARSEVIT_CPU_STR(SPARSEVIT_CPU_ISA),
      {&forward_rows<float, float>, &backward_query_rows<float, float>, &backward_key_rows<float, float>, &forward_rows_diagonal<float, float>,
       &backward_query_rows_diagonal<float, float>, &backward_key_rows_diagonal<float, float>},
      {&forward_rows<double, double>, &backward_query_rows<double, double>, &backward_key_rows<double, double>, &forward_rows_diagonal<double, double>,
       &backward_query_rows_diagonal<double, double>, &backward_key_rows_diagonal<double, double>},
      {&forward_rows<float, Bf16>, &backward_query_rows<float, Bf16>, &backward_key_rows<float, Bf16>,
       &forward_rows_diagonal<float, Bf16>, &backward_query_rows_diagonal<float, Bf16>,
       &backward_key_rows_diagonal<float, Bf16>},
  };
  return t;
}

}  // namespace sparsevit::ops::cpu::SPARSEVIT_CPU_ISA

#undef SV_INLINE
