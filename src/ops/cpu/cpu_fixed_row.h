// Fixed-D row primitives of the CPU kernels: FixedRow (a row held in registers for a compile-time
// head dimension), gathered dots and weighted sums over it, W-row block dots, the flat row cursor
// and dispatch_dim (runtime D -> compile-time D). ISA-parametrised: include only through
// sparse_attention_cpu_impl.h, after cpu_simd.h.
#pragma once

#if !defined(SPARSEVIT_CPU_ISA) || !defined(SPARSEVIT_CPU_IMPL_NAMESPACE_OPEN)
#error "include only through ops/cpu/sparse_attention_cpu_impl.h (inside its per-ISA namespace)"
#endif

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
