// The arithmetic the CUDA kernels and their host emulation share: one warp per row, the lane
// layout of a head's D elements, bfloat16 conversions, pair loads and stores, the warp sum and
// the online-softmax update order. Everything here is `__host__ __device__` (SV_HD) and compiled
// twice: by nvcc into the kernels (sparse_attention_kernels.cu) and by the host C++ compiler into
// the emulation (host_emulation.cpp), so CI checks the same index math, masks and reduction order
// that the GPU runs.
//
// One warp owns one row (a query row in the forward and the backward's query pass, a key row in
// the key pass). Its 32 lanes split D: lane l holds elements {64p + 2l, 64p + 2l + 1} for pair
// p < kMaxPairs (D <= 128), so each pair load of a row is one coalesced 4-byte (bfloat16) or
// 8-byte (float32) access per lane. Dot products are per-lane partial sums (explicit fma, in
// element order) reduced by a xor butterfly (5 shuffles; every lane ends with the same bits).
// Accumulators are float32 (float64 for double inputs).
//
// Lane-local state is a PerLane<X>: on the device one X per thread (the lane index is its own);
// in the host emulation an array of 32, indexed by lane. Code is written "for each lane I hold"
// (`for (int lane : warp.lanes())`), which is one iteration on the device and 32 on the host.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SV_HD __host__ __device__ __forceinline__
#define SV_UNROLL _Pragma("unroll")
#else
#include <cmath>
#define SV_HD inline
#define SV_UNROLL
#endif

namespace sparsevit::ops::cuda {

// The raw bits of a bfloat16 (the upper 16 bits of a float32), as the CPU kernels store it.
using BFloat16Bits = uint16_t;

constexpr int kWarpLanes = 32;
// Pairs of elements per lane: D <= 2 * 32 * kMaxPairs = 128.
constexpr int kMaxPairs = 2;
constexpr int64_t kMaxHeadDim = 2 * kWarpLanes * kMaxPairs;
// Keys (or queries in the key pass) loaded per step: their loads are in flight together, and the
// softmax update runs once per chunk.
constexpr int kKeyChunk = 4;
// Warps per thread block (rows per block).
constexpr int kWarpsPerBlock = 4;
constexpr int kThreadsPerBlock = kWarpsPerBlock * kWarpLanes;

#if defined(__CUDA_ARCH__)
constexpr int kLaneSlots = 1;  // a thread holds its own lane
#else
constexpr int kLaneSlots = kWarpLanes;  // the emulation holds the whole warp
#endif

// One value per lane (see the header comment).
template <typename X>
struct PerLane {
  X v[kLaneSlots];
  SV_HD X& operator[](int lane) { return v[kLaneSlots == 1 ? 0 : lane]; }
  SV_HD const X& operator[](int lane) const { return v[kLaneSlots == 1 ? 0 : lane]; }
};

// [begin, end) of the lanes a thread (device) or the emulation (host) runs.
struct LaneRange {
  int first, last;
  struct It {
    int l;
    SV_HD int operator*() const { return l; }
    SV_HD It& operator++() {
      ++l;
      return *this;
    }
    SV_HD bool operator!=(const It& o) const { return l != o.l; }
  };
  SV_HD It begin() const { return {first}; }
  SV_HD It end() const { return {last}; }
};

// ---- scalar math: one spelling for both compilers ------------------------------------------------

SV_HD float sv_fma(float a, float b, float c) { return fmaf(a, b, c); }
SV_HD double sv_fma(double a, double b, double c) { return fma(a, b, c); }
SV_HD float sv_exp(float x) { return expf(x); }
SV_HD double sv_exp(double x) { return exp(x); }
SV_HD float sv_log(float x) { return logf(x); }
SV_HD double sv_log(double x) { return log(x); }
template <typename T>
SV_HD T sv_neg_inf() {
  return -static_cast<T>(INFINITY);
}
template <typename T>
SV_HD T sv_max(T a, T b) {
  return a > b ? a : b;
}

SV_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
SV_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SV_HD float bf16_to_float(BFloat16Bits b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }
// Round to nearest even, NaN stays (quiet) NaN: c10::BFloat16's rounding, as the CPU kernels store.
SV_HD BFloat16Bits float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<BFloat16Bits>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<BFloat16Bits>(u >> 16);
}

// 4 bytes of a 4-byte-aligned address (two bfloat16), without breaking aliasing rules on the host.
SV_HD uint32_t load_u32(const BFloat16Bits* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  uint32_t u;
  std::memcpy(&u, p, sizeof u);
  return u;
#endif
}
SV_HD void store_u32(BFloat16Bits* p, uint32_t u) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<unsigned int*>(p) = u;
#else
  std::memcpy(p, &u, sizeof u);
#endif
}

// ---- the lane layout --------------------------------------------------------------------------

// Element index of lane `lane`'s pair p, half i (0 or 1).
SV_HD int64_t lane_element(int lane, int p, int i) { return 64 * p + 2 * lane + i; }

// A lane's share of one row: kMaxPairs pairs, in the compute type.
template <typename T>
struct LaneVec {
  T x[kMaxPairs][2];
  SV_HD void zero() {
    for (int p = 0; p < kMaxPairs; ++p) x[p][0] = x[p][1] = T(0);
  }
};

// Storage -> compute: float/double read as themselves, bfloat16 widened.
SV_HD float to_compute(float s) { return s; }
SV_HD double to_compute(double s) { return s; }
SV_HD float to_compute(BFloat16Bits s) { return bf16_to_float(s); }
SV_HD void from_compute(float& d, float x) { d = x; }
SV_HD void from_compute(double& d, double x) { d = x; }
SV_HD void from_compute(BFloat16Bits& d, float x) { d = float_to_bf16(x); }

// Lane `lane`'s elements of a row of D; elements at d >= D are 0 and never read. `pair_loads`:
// every row start is aligned to two elements (checked once per call, pair_loads_allowed), so a
// full pair is one access.
template <typename T, typename S>
SV_HD LaneVec<T> load_lane(const S* row, int lane, int64_t D, bool pair_loads) {
  LaneVec<T> r;
  SV_UNROLL
  for (int p = 0; p < kMaxPairs; ++p) {
    const int64_t d = lane_element(lane, p, 0);
    r.x[p][0] = r.x[p][1] = T(0);
    if (d + 1 < D) {
      if constexpr (sizeof(S) == 2) {
        if (pair_loads) {
          const uint32_t u = load_u32(row + d);
          r.x[p][0] = bits_to_float(u << 16);
          r.x[p][1] = bits_to_float(u & 0xffff0000u);
          continue;
        }
      }
#if defined(__CUDA_ARCH__)
      if constexpr (sizeof(S) == 4) {
        if (pair_loads) {
          const float2 f = __ldg(reinterpret_cast<const float2*>(row + d));
          r.x[p][0] = f.x;
          r.x[p][1] = f.y;
          continue;
        }
      }
#endif
      r.x[p][0] = to_compute(row[d]);
      r.x[p][1] = to_compute(row[d + 1]);
    } else if (d < D) {
      r.x[p][0] = to_compute(row[d]);
    }
  }
  return r;
}

// Writes lane `lane`'s elements of v * factor (only d < D).
template <typename T, typename S>
SV_HD void store_lane(S* row, int lane, int64_t D, bool pair_loads, const LaneVec<T>& v, T factor) {
  SV_UNROLL
  for (int p = 0; p < kMaxPairs; ++p) {
    const int64_t d = lane_element(lane, p, 0);
    const T a = v.x[p][0] * factor, b = v.x[p][1] * factor;
    if (d + 1 < D) {
      if constexpr (sizeof(S) == 2) {
        if (pair_loads) {
          store_u32(row + d, static_cast<uint32_t>(float_to_bf16(a)) | (static_cast<uint32_t>(float_to_bf16(b)) << 16));
          continue;
        }
      }
      from_compute(row[d], a);
      from_compute(row[d + 1], b);
    } else if (d < D) {
      from_compute(row[d], a);
    }
  }
}

// Lane `lane`'s part of a . b, in element order (the padding lanes add zeros).
template <typename T>
SV_HD T lane_dot(const LaneVec<T>& a, const LaneVec<T>& b) {
  T s = T(0);
  SV_UNROLL
  for (int p = 0; p < kMaxPairs; ++p) {
    s = sv_fma(a.x[p][0], b.x[p][0], s);
    s = sv_fma(a.x[p][1], b.x[p][1], s);
  }
  return s;
}

// acc = w * x + acc, element by element.
template <typename T>
SV_HD void lane_axpy(LaneVec<T>& acc, T w, const LaneVec<T>& x) {
  SV_UNROLL
  for (int p = 0; p < kMaxPairs; ++p) {
    acc.x[p][0] = sv_fma(w, x.x[p][0], acc.x[p][0]);
    acc.x[p][1] = sv_fma(w, x.x[p][1], acc.x[p][1]);
  }
}

template <typename T>
SV_HD void lane_scale(LaneVec<T>& acc, T c) {
  SV_UNROLL
  for (int p = 0; p < kMaxPairs; ++p) {
    acc.x[p][0] *= c;
    acc.x[p][1] *= c;
  }
}

// One level of the xor butterfly: a lane's value plus its partner's. Both partners compute the same
// sum (addition commutes exactly), so after the five levels every lane holds identical bits.
template <typename T>
SV_HD T butterfly_combine(T mine, T partner) {
  return mine + partner;
}
// The partner offsets, first to last.
SV_HD int butterfly_offset(int level) { return 16 >> level; }
constexpr int kButterflyLevels = 5;

// ---- online softmax ------------------------------------------------------------------------------
//
// A row's keys arrive in chunks of kKeyChunk positions, some masked, in the row's fixed key order.
// Per chunk: m' = max(m, s_i over the valid i); the old state is rescaled by c = exp(m - m') (0 for
// the first keys); p_i = exp(s_i - m') (0 when masked); l' = l * c + p_0 + ... + p_3 (left to
// right, valid ones only). The accumulators take acc' = acc * c, then acc' += p_i * v_i in key
// order. Finally out = acc * (1 / l), lse = m + log(l); a row with no keys gives out = 0 and
// lse = -inf.
template <typename T>
struct OnlineSoftmax {
  T m, l;
  SV_HD OnlineSoftmax() : m(sv_neg_inf<T>()), l(T(0)) {}
  // Scores s, validity ok in; weights p out; returns the rescale factor c for the accumulators.
  SV_HD T update(const T (&s)[kKeyChunk], const bool (&ok)[kKeyChunk], T (&p)[kKeyChunk]) {
    T m_new = m;
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i)
      if (ok[i]) m_new = sv_max(m_new, s[i]);
    if (m_new == sv_neg_inf<T>()) {  // nothing valid yet: the state stays empty
      for (int i = 0; i < kKeyChunk; ++i) p[i] = T(0);
      return T(0);
    }
    const T c = m == sv_neg_inf<T>() ? T(0) : sv_exp(m - m_new);
    T sum = l * c;
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) {
      p[i] = ok[i] ? sv_exp(s[i] - m_new) : T(0);
      if (ok[i]) sum += p[i];
    }
    m = m_new;
    l = sum;
    return c;
  }
  SV_HD T lse() const { return m + sv_log(l); }
};

// Whether every row of a per-token tensor starts two-element aligned (pair accesses allowed):
// the base address and the strides (in elements) are even. Checked by the glue and the emulation.
template <typename S>
inline bool pair_aligned(const S* data, int64_t stride_b, int64_t stride_h, int64_t stride_n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  return a % (2 * sizeof(S)) == 0 && stride_b % 2 == 0 && stride_h % 2 == 0 && stride_n % 2 == 0;
}

}  // namespace sparsevit::ops::cuda
