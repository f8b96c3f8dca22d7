// SIMD vocabulary of the CPU kernels: the vector types V<T>, bf16 storage loads/stores, horizontal
// sums and the transposing reduction, dot/axpy/gather row helpers, vectorised exp and log.
// ISA-parametrised (the vector width is SPARSEVIT_CPU_VECTOR_BYTES): include only through
// sparse_attention_cpu_impl.h, which opens the per-ISA anonymous namespace around it.
#pragma once

#if !defined(SPARSEVIT_CPU_ISA) || !defined(SPARSEVIT_CPU_IMPL_NAMESPACE_OPEN)
#error "include only through ops/cpu/sparse_attention_cpu_impl.h (inside its per-ISA namespace)"
#endif

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

// ---- transposing reduction ------------------------------------------------------------------

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
