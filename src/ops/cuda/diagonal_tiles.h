// The tiled diagonal kernels (docs/gpu.md, "Design: tiles of consecutive queries"): the work of
// one CTA on one tile, shared by the CUDA kernels (a DeviceCta: each thread runs its own group and
// lane) and the host emulation (an EmulatedCta: every group and lane in loops, phases between
// barriers in order, global-memory traffic counted). A Cta provides:
//   groups(), lanes(), threads()     what this code runs for (device: its own; host: all)
//   group_sum(LaneSlots<T>)          the xor butterfly over a group's lanes
//   sync()                           __syncthreads (host: closes the phase's load instructions)
//   copy(tid, smem_dst, src, bytes)  a stage copy (cp.async on sm_80+), commit() / wait(n);
//                                    idle(tid): a thread with nothing to copy in this round
//   load<U>(tid, p), store(tid, p, v) counted global accesses; smem()  the dynamic shared memory
//   compute()                        false while the emulation only counts traffic
// Forward: out, lse for a tile of queries; backward query pass: Di, dq; backward key pass: dk, dv
// for a tile of keys; each also writes its tile's partials of the global rows (columns), which the
// merge_* functions combine in tile order. Every output element is written by one thread, its terms
// in an order fixed by the pattern and the tile shape: no atomics, bit-identical reruns.
#pragma once

#include "ops/cuda/cuda_kernel_params.h"
#include "ops/cuda/diagonal_tile_plan.h"
#include "ops/cuda/warp_rows.h"  // HeadDiagonals

namespace sparsevit::ops::cuda {

#if defined(__CUDA_ARCH__)
constexpr int kHostGroups = 1, kHostLanes = 1;
#else
constexpr int kHostGroups = 256, kHostLanes = 16;  // the widest shapes the emulation runs
#endif

// One value per group / per lane of a group: one on the device (a thread's own), all on the host.
template <typename X, int kSlots>
struct Slots {
  X v[kSlots];
  SV_HD X& operator[](int i) { return v[kSlots == 1 ? 0 : i]; }
  SV_HD const X& operator[](int i) const { return v[kSlots == 1 ? 0 : i]; }
};
template <typename X>
using GroupSlots = Slots<X, kHostGroups>;
// One value per query of a group (kQ queries per group): kQ on the device, all the tile's on the host.
#if defined(__CUDA_ARCH__)
template <typename X, int kQ>
using QuerySlots = Slots<X, kQ>;
template <int kQ>
SV_HD int query_slot(int, int qi) { return qi; }
#else
template <typename X, int kQ>
using QuerySlots = Slots<X, 512>;  // the widest tile the emulation runs
template <int kQ>
SV_HD int query_slot(int g, int qi) { return g * kQ + qi; }
#endif
template <typename X>
using LaneSlots = Slots<X, kHostLanes>;

// A lane's E consecutive elements of a row (lane l holds elements l*E .. l*E + E - 1).
template <typename T, int E>
struct LaneRow {
  T x[E];
  SV_HD void zero() {
    SV_UNROLL
    for (int e = 0; e < E; ++e) x[e] = T(0);
  }
};

// ---- lane arithmetic on staged rows ------------------------------------------------------------

// Which elements a lane holds: its E elements are E / per 16-byte chunks (per = 16 / sizeof(S)
// elements each), chunk c of lane l being the row's chunk c * L + l. So one load instruction of a
// group reads L consecutive chunks, and a warp's instruction reads whole sectors of its rows.
template <int L, typename S>
SV_HD int64_t lane_chunk_first(int lane, int c) {
  return static_cast<int64_t>(c * L + lane) * (16 / static_cast<int>(sizeof(S)));
}

// Chunk c of lane `lane`'s elements of a shared-memory row (one 16-byte shared load on the device);
// elements at or past D read as 0 (kDim 0: a generic shape, not launched by the device today).
template <int kDim, int L, typename T, typename S>
SV_HD void read_lane_chunk(T* x, const S* row, int lane, int c, int64_t D) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  const S* p = row + lane_chunk_first<L, S>(lane, c);
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(S) == 2) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    SV_UNROLL
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = bits_to_float(w[i] << 16);
      x[2 * i + 1] = bits_to_float(w[i] & 0xffff0000u);
    }
  } else if constexpr (sizeof(S) == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    x[0] = f.x;
    x[1] = f.y;
    x[2] = f.z;
    x[3] = f.w;
  } else {
    const double2 f = *reinterpret_cast<const double2*>(p);
    x[0] = f.x;
    x[1] = f.y;
  }
#else
  for (int i = 0; i < per; ++i) x[i] = to_compute(p[i]);
#endif
  if (kDim == 0) {
    SV_UNROLL
    for (int i = 0; i < per; ++i)
      if (lane_chunk_first<L, S>(lane, c) + i >= D) x[i] = T(0);
  }
}

// Lane `lane`'s elements of a shared-memory row.
template <int kDim, int L, int E, typename T, typename S>
SV_HD void read_lane(LaneRow<T, E>& r, const S* row, int lane, int64_t D) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  SV_UNROLL
  for (int c = 0; c < E / per; ++c) read_lane_chunk<kDim, L>(r.x + c * per, row, lane, c, D);
}

template <typename T, int E>
SV_HD T row_dot(const LaneRow<T, E>& a, const LaneRow<T, E>& b) {
  T s = T(0);
  SV_UNROLL
  for (int e = 0; e < E; ++e) s = sv_fma(a.x[e], b.x[e], s);
  return s;
}
template <typename T, int E>
SV_HD void row_axpy(LaneRow<T, E>& acc, T w, const LaneRow<T, E>& x) {
  SV_UNROLL
  for (int e = 0; e < E; ++e) acc.x[e] = sv_fma(w, x.x[e], acc.x[e]);
}
template <typename T, int E>
SV_HD void row_scale(LaneRow<T, E>& acc, T c) {
  SV_UNROLL
  for (int e = 0; e < E; ++e) acc.x[e] *= c;
}

// ---- global memory <-> CTA -----------------------------------------------------------------------

// Whether a tensor's rows can be copied in 16-byte chunks: base, row stride and row length 16-byte
// multiples.
template <typename S>
SV_HD bool rows_16byte(const S* base, int64_t stride_n, int64_t D) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(base);
  return a % 16 == 0 && (stride_n * static_cast<int64_t>(sizeof(S))) % 16 == 0 &&
         (D * static_cast<int64_t>(sizeof(S))) % 16 == 0;
}

// Copies `rows` rows (row r is global row row_of(r) of base/stride_n) into shared memory at pitch P:
// 16-byte chunks spread over all threads (consecutive threads, consecutive chunks: each warp's
// copy instruction reads whole sectors), or element by element when a row is not 16-byte aligned.
template <typename Cta, typename S, typename RowOf>
SV_HD void stage_tensor(Cta& cta, S* dst, int64_t P, const S* base, int64_t stride_n, int64_t rows, RowOf row_of,
                        int64_t D) {
  const int64_t nt = cta.num_threads();
  if (rows_16byte(base, stride_n, D)) {
    const int64_t per = 16 / static_cast<int64_t>(sizeof(S)), cpr = D / per, total = rows * cpr;
    for (int64_t c0 = 0; c0 < total; c0 += nt)
      for (int t : cta.threads()) {
        const int64_t c = c0 + t;
        if (c >= total) {
          cta.idle(t);
          continue;
        }
        const int64_t r = c / cpr, o = (c - r * cpr) * per;
        cta.copy(t, dst + r * P + o, base + row_of(r) * stride_n + o, 16);
      }
  } else {
    const int64_t total = rows * D;
    for (int64_t c0 = 0; c0 < total; c0 += nt)
      for (int t : cta.threads()) {
        const int64_t c = c0 + t;
        if (c >= total) {
          cta.idle(t);
          continue;
        }
        const int64_t r = c / D, d = c - r * D;
        cta.copy(t, dst + r * P + d, base + row_of(r) * stride_n + d, static_cast<int>(sizeof(S)));
      }
  }
}

// `n` consecutive scalars src[0 .. n) into shared memory, one per thread.
template <typename Cta, typename T>
SV_HD void stage_scalars(Cta& cta, T* dst, const T* src, int64_t n) {
  for (int64_t c0 = 0; c0 < n; c0 += cta.num_threads())
    for (int t : cta.threads()) {
      if (c0 + t < n) {
        cta.copy(t, dst + c0 + t, src + c0 + t, static_cast<int>(sizeof(T)));
      } else {
        cta.idle(t);
      }
    }
}

// Lane `lane`'s elements of a global row into registers (16-byte loads when the row allows).
template <int kDim, int L, int E, typename Cta, typename T, typename S>
SV_HD void load_lane_row(Cta& cta, int tid, LaneRow<T, E>& r, const S* row, int lane, int64_t D, bool vec16) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  r.zero();
  SV_UNROLL
  for (int c = 0; c < E / per; ++c) {
    const int64_t first = lane_chunk_first<L, S>(lane, c);
    if (vec16 && (kDim != 0 || first + per <= D)) {
      alignas(16) S buf[per];
      cta.load16(tid, buf, row + first);
      SV_UNROLL
      for (int i = 0; i < per; ++i) r.x[c * per + i] = to_compute(buf[i]);
    } else {
      for (int i = 0; i < per; ++i)
        if (first + i < D) r.x[c * per + i] = to_compute(cta.load(tid, row + first + i));
    }
  }
}

// Lane `lane`'s elements of v * factor to a global row.
template <int kDim, int L, int E, typename Cta, typename T, typename S>
SV_HD void store_lane_row(Cta& cta, int tid, S* row, int lane, int64_t D, bool vec16, const LaneRow<T, E>& v, T factor) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  SV_UNROLL
  for (int c = 0; c < E / per; ++c) {
    const int64_t first = lane_chunk_first<L, S>(lane, c);
    alignas(16) S buf[per];
    SV_UNROLL
    for (int i = 0; i < per; ++i) from_compute(buf[i], v.x[c * per + i] * factor);
    if (vec16 && (kDim != 0 || first + per <= D)) {
      cta.store16(tid, row + first, buf);
    } else {
      for (int i = 0; i < per; ++i)
        if (first + i < D) cta.store(tid, row + first + i, buf[i]);
    }
  }
}

// ---- stages ---------------------------------------------------------------------------------------

// Runs the tile's stages in increasing row order, double-buffered: stage s + 1 is copied (issue)
// while stage s is used (use(buffer, lo, hi)); a barrier after each use frees its buffer.
template <typename Cta, typename Issue, typename Use>
SV_HD void run_stages(Cta& cta, const SliceUnion& un, int64_t max_rows, Issue&& issue, Use&& use) {
  int64_t lo = 0, hi = 0;
  bool have = un.stage(0, max_rows, lo, hi);
  if (have) issue(0, lo, hi);
  cta.commit();
  for (int s = 0; have; ++s) {
    int64_t nlo = 0, nhi = 0;
    const bool next = un.stage(hi, max_rows, nlo, nhi);
    if (next) issue((s + 1) & 1, nlo, nhi);
    cta.commit();
    cta.wait(next ? 1 : 0);
    cta.sync();
    use(s & 1, lo, hi);
    cta.sync();
    lo = nlo;
    hi = nhi;
    have = next;
  }
}

// Shared-memory carve-up in order; every piece 16-byte aligned.
struct SmemCursor {
  char* p;
  template <typename U>
  SV_HD U* take(int64_t bytes) {
    U* r = reinterpret_cast<U*>(p);
    p += align16(bytes);
    return r;
  }
};

// A head's tile of G rows starting at t0, and its diagonal structure.
struct TileOf {
  int64_t bh, h, t0, tile, tiles, n_own;
};

// The global tokens' per-tile partial state in shared memory (max, sum, P accumulators per global,
// `acc_rows` of them) and the per-group score scratch.
template <typename T>
struct GlobalPartials {
  T *acc, *m, *l, *a, *b, *m_next;
  int64_t P, G;
  SV_HD GlobalPartials(SmemCursor& c, int64_t bytes, int acc_rows, int64_t P_, int64_t G_) : P(P_), G(G_) {
    acc = c.take<T>(bytes);
    m = acc + acc_rows * kMaxTileGlobals * P;
    l = m + kMaxTileGlobals;
    a = acc + acc_rows * kMaxTileGlobals * (P + 2);
    b = a + kMaxTileGlobals * G;
    m_next = b + kMaxTileGlobals * G;
  }
  SV_HD T* row(int which, int64_t gi) const { return acc + (which * kMaxTileGlobals + gi) * P; }
};

template <typename Cta, typename T>
SV_HD void zero_partials(Cta& cta, const GlobalPartials<T>& gp, int acc_rows, int64_t ng) {
  for (int t : cta.threads()) {
    for (int64_t i = t; i < acc_rows * kMaxTileGlobals * gp.P; i += cta.num_threads()) gp.acc[i] = T(0);
    if (t < ng) {
      gp.m[t] = sv_neg_inf<T>();
      gp.l[t] = T(0);
    }
  }
}

// ---- forward --------------------------------------------------------------------------------------

// The lane-level loops of the chunk functions run over the lane's 16-byte chunks outermost, so a
// thread holds one chunk of each row at a time (registers), while each element still sums its
// terms in the same order (element order for dot products, slot order for accumulations).

// One chunk of up to kKeyChunk keys of query row qrow: scores (all partial dots before any
// reduction), the online-softmax update, acc += p v.
template <int kDim, int L, int E, typename Cta, typename T, typename S>
SV_HD void forward_chunk(const Cta& cta, int g, const S* qrow, LaneSlots<LaneRow<T, E>>& acc, OnlineSoftmax<T>& sm,
                         const S* const (&kr)[kKeyChunk], const S* const (&vr)[kKeyChunk], const bool (&ok)[kKeyChunk],
                         T scale, int64_t D) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  LaneSlots<T> part[kKeyChunk];
  for (int lane : cta.lanes()) {
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) part[i][lane] = T(0);
    SV_UNROLL
    for (int c = 0; c < E / per; ++c) {
      T q[per];
      read_lane_chunk<kDim, L>(q, qrow, lane, c, D);
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!ok[i]) continue;
        T k[per];
        read_lane_chunk<kDim, L>(k, kr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) part[i][lane] = sv_fma(q[e], k[e], part[i][lane]);
      }
    }
  }
  T s[kKeyChunk], p[kKeyChunk];
  SV_UNROLL
  for (int i = 0; i < kKeyChunk; ++i) s[i] = ok[i] ? cta.group_sum(g, part[i]) * scale : T(0);
  const T c = sm.update(s, ok, p);
  for (int lane : cta.lanes()) {
    row_scale(acc[lane], c);
    SV_UNROLL
    for (int ch = 0; ch < E / per; ++ch) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!ok[i]) continue;
        T v[per];
        read_lane_chunk<kDim, L>(v, vr[i], lane, ch, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) acc[lane].x[ch * per + e] = sv_fma(p[i], v[e], acc[lane].x[ch * per + e]);
      }
    }
  }
}

// The next up to kKeyChunk slots of a row whose key (or query) lies below `hi`, at fixed chunk
// positions (so the per-chunk arrays stay in registers): position i is taken when slot `slot` (an
// index into the head's ascending deltas, stepping by `step`) is in range and its row below hi; ok
// when that row is a staged one in [lo, N) and not a global token; at[i] its row within the stage.
// Returns whether any position was taken.
SV_HD bool next_chunk(const HeadDiagonals& hd, int64_t own, int sign, int step, int64_t& slot, int64_t lo, int64_t hi,
                      bool (&ok)[kKeyChunk], int64_t (&at)[kKeyChunk]) {
  bool any = false, stop = false;
  SV_UNROLL
  for (int i = 0; i < kKeyChunk; ++i) {
    const bool in_range = !stop && slot >= 0 && slot < hd.nd;
    const int64_t r = in_range ? own + sign * static_cast<int64_t>(hd.deltas[slot]) : 0;
    const bool take = in_range && r < hi;
    stop = stop || (in_range && r >= hi) || !in_range;
    if (take) slot += step;
    any = any || take;
    ok[i] = take && r >= lo && r < hd.n_tokens && !hd.isg[r];
    at[i] = ok[i] ? r - lo : 0;
  }
  return any;
}

// Query tile `tile` of batch-head bh (kQueries queries: query t0 + qi * G + g is group g's qi-th):
// out and lse of its non-global queries, and its partials (m, l, acc) of every global row over the
// tile's own keys.
template <int kDim, typename Cta, typename T, typename S>
SV_HD void forward_tile(Cta& cta, const ForwardArgs<T, S>& a, int64_t bh, int64_t tile) {
  using Shape = TileShape<T, kDim>;
  constexpr int E = Shape::kLaneElems, G = Shape::kGroups, L = Shape::kLanes, Q = Shape::kForwardQueries;
  constexpr int64_t P = Shape::kPitch, GQ = static_cast<int64_t>(G) * Q;
  const int64_t H = a.heads, N = a.tokens, D = kDim != 0 ? kDim : a.dim, h = bh % H;
  const HeadDiagonals hd(a.diag, h, N);
  const int64_t nd = hd.nd, ng = hd.ng, t0 = tile * GQ, tiles = tiles_for(N, GQ), n_own = N - t0 < GQ ? N - t0 : GQ;
  const TileSmem<T, S, kDim> lay = forward_smem<T, S, kDim>();
  SmemCursor cur{cta.smem()};
  S* oq = cur.template take<S>(lay.own_bytes);
  S* gk = cur.template take<S>(lay.global_bytes);
  S* gv = gk + kMaxTileGlobals * P;
  S* gq = gv + kMaxTileGlobals * P;
  GlobalPartials<T> gp(cur, lay.acc_bytes, 1, P, GQ);
  S* const buf0 = cur.template take<S>(2 * lay.stage_bytes);  // the two stage buffers
  auto buf = [&](int which) { return reinterpret_cast<S*>(reinterpret_cast<char*>(buf0) + which * lay.stage_bytes); };
  const int64_t R = lay.stage_rows_n;
  const S* kb = a.k.row(bh, H, 0);
  const S* vb = a.v.row(bh, H, 0);
  const S* qb = a.q.row(bh, H, 0);
  const int64_t sk = a.k.stride_n, sv = a.v.stride_n, sq = a.q.stride_n;

  // The tile's q rows, and the global tokens' K, V (their columns) and q (their rows), once.
  auto own = [&](int64_t r) { return t0 + r; };
  auto glob = [&](int64_t r) { return static_cast<int64_t>(hd.globs[r]); };
  stage_tensor(cta, oq, P, qb, sq, n_own, own, D);
  stage_tensor(cta, gk, P, kb, sk, ng, glob, D);
  stage_tensor(cta, gv, P, vb, sv, ng, glob, D);
  stage_tensor(cta, gq, P, qb, sq, ng, glob, D);
  zero_partials(cta, gp, 1, ng);
  cta.commit();
  cta.wait(0);
  cta.sync();

  QuerySlots<LaneSlots<LaneRow<T, E>>, Q> acc;
  QuerySlots<OnlineSoftmax<T>, Q> sm;
  QuerySlots<int64_t, Q> slot;
  for (int g : cta.groups())
    for (int qi = 0; qi < Q; ++qi) {
      const int x = query_slot<Q>(g, qi);
      slot[x] = 0;
      sm[x] = OnlineSoftmax<T>();
      for (int lane : cta.lanes()) acc[x][lane].zero();
    }

  const SliceUnion un{hd.deltas, nd, t0, GQ, N, +1, ng > 0};
  auto issue = [&](int which, int64_t lo, int64_t hi) {
    S* kbuf = buf(which);
    S* vbuf = kbuf + R * P;
    auto rows = [&](int64_t r) { return lo + r; };
    stage_tensor(cta, kbuf, P, kb, sk, hi - lo, rows, D);
    stage_tensor(cta, vbuf, P, vb, sv, hi - lo, rows, D);
  };
  auto use = [&](int which, int64_t lo, int64_t hi) {
    const S* kbuf = buf(which);
    const S* vbuf = kbuf + R * P;
    if (!cta.compute()) return;
    // Every query: its slots whose key lies in [lo, hi), in slot order, kKeyChunk at a time.
    for (int g : cta.groups())
      for (int qi = 0; qi < Q; ++qi) {
        const int x = query_slot<Q>(g, qi);
        const int64_t j = t0 + qi * G + g;
        if (j >= N || hd.isg[j]) continue;
        bool ok[kKeyChunk];
        int64_t at[kKeyChunk];
        while (next_chunk(hd, j, +1, +1, slot[x], lo, hi, ok, at)) {
          const S* kr[kKeyChunk];
          const S* vr[kKeyChunk];
          SV_UNROLL
          for (int i = 0; i < kKeyChunk; ++i) {
            kr[i] = kbuf + at[i] * P;
            vr[i] = vbuf + at[i] * P;
          }
          forward_chunk<kDim, L, E>(cta, g, oq + (j - t0) * P, acc[x], sm[x], kr, vr, ok, a.scale, D);
        }
      }
    // The global rows over the tile's own keys in this stage: scores, then (after a barrier) the
    // running max, the weights, and acc += p v summed over the tile's keys in order.
    const int64_t own_lo = t0 > lo ? t0 : lo, own_hi = t0 + GQ < hi ? t0 + GQ : hi;
    if (ng == 0 || own_lo >= own_hi) return;
    for (int g : cta.groups())
      for (int qi = 0; qi < Q; ++qi) {
        const int64_t r = t0 + qi * G + g;
        const bool in = r >= lo && r < hi;
        for (int64_t gi = 0; gi < ng; ++gi) {
          LaneSlots<T> part;
          for (int lane : cta.lanes()) {
            part[lane] = T(0);
            if (!in) continue;
            LaneRow<T, E> qg, k;
            read_lane<kDim, L>(qg, gq + gi * P, lane, D);
            read_lane<kDim, L>(k, kbuf + (r - lo) * P, lane, D);
            part[lane] = row_dot(qg, k);
          }
          const T sc = cta.group_sum(g, part) * a.scale;
          for (int lane : cta.lanes())
            if (lane == 0) gp.a[gi * GQ + (r - t0)] = in ? sc : sv_neg_inf<T>();
        }
      }
    cta.sync();
    for (int t : cta.threads())
      for (int64_t gi = 0; gi < ng; ++gi) {
        T mx = gp.m[gi];
        for (int64_t i = 0; i < GQ; ++i) mx = sv_max(mx, gp.a[gi * GQ + i]);
        for (int64_t i = t; i < GQ; i += cta.num_threads())
          gp.b[gi * GQ + i] = gp.a[gi * GQ + i] == sv_neg_inf<T>() ? T(0) : sv_exp(gp.a[gi * GQ + i] - mx);
        if (t == 0) gp.m_next[gi] = mx;
      }
    cta.sync();
    for (int t : cta.threads())
      for (int64_t gi = 0; gi < ng; ++gi) {
        const T c = gp.m[gi] == sv_neg_inf<T>() ? T(0) : sv_exp(gp.m[gi] - gp.m_next[gi]);
        for (int64_t d = t; d < D; d += cta.num_threads()) {
          T y = gp.row(0, gi)[d] * c;
          for (int64_t r = own_lo; r < own_hi; ++r) y = sv_fma(gp.b[gi * GQ + (r - t0)], to_compute(vbuf[(r - lo) * P + d]), y);
          gp.row(0, gi)[d] = y;
        }
        if (t == 0) {
          T l = gp.l[gi] * c;
          for (int64_t r = own_lo; r < own_hi; ++r) l += gp.b[gi * GQ + (r - t0)];
          gp.l[gi] = l;
        }
      }
    cta.sync();
    for (int t : cta.threads())
      if (t < ng) gp.m[t] = gp.m_next[t];
  };
  run_stages(cta, un, R, issue, use);

  // The global columns, then out and lse.
  const bool ovec = rows_16byte(a.out.row(bh, H, 0), a.out.stride_n, D);
  for (int g : cta.groups())
    for (int qi = 0; qi < Q; ++qi) {
      const int x = query_slot<Q>(g, qi);
      const int64_t j = t0 + qi * G + g;
      if (j >= N || hd.isg[j]) continue;
      if (cta.compute())
        for (int64_t i0 = 0; i0 < ng; i0 += kKeyChunk) {
          const S* kr[kKeyChunk];
          const S* vr[kKeyChunk];
          bool ok[kKeyChunk];
          SV_UNROLL
          for (int i = 0; i < kKeyChunk; ++i) {
            ok[i] = i0 + i < ng;
            kr[i] = gk + (ok[i] ? i0 + i : 0) * P;
            vr[i] = gv + (ok[i] ? i0 + i : 0) * P;
          }
          forward_chunk<kDim, L, E>(cta, g, oq + (j - t0) * P, acc[x], sm[x], kr, vr, ok, a.scale, D);
        }
      const bool has_keys = sm[x].l > T(0);
      const T inv = has_keys ? T(1) / sm[x].l : T(0);
      for (int lane : cta.lanes()) {
        store_lane_row<kDim, L>(cta, cta.tid(g, lane), a.out.row(bh, H, j), lane, D, ovec, acc[x][lane], inv);
        if (lane == 0) cta.store(cta.tid(g, lane), a.lse + bh * N + j, has_keys ? sm[x].lse() : sv_neg_inf<T>());
      }
    }
  // This tile's partials of the global rows: (m, l, acc[D]) at [(gi * tiles + tile) * (D + 2)].
  T* part = a.partials + bh * a.partial_stride;
  for (int t : cta.threads())
    for (int64_t gi = 0; gi < ng; ++gi) {
      T* p = part + (gi * tiles + tile) * (D + 2);
      if (t == 0) {
        cta.store(t, p, gp.m[gi]);
        cta.store(t, p + 1, gp.l[gi]);
      }
      for (int64_t d = t; d < D; d += cta.num_threads()) cta.store(t, p + 2 + d, gp.row(0, gi)[d]);
    }
}

// Global row gi of batch-head bh: its tiles' partials combined in tile order into out and lse.
template <typename Cta, typename T, typename S>
SV_HD void forward_merge(Cta& cta, const ForwardArgs<T, S>& a, int64_t bh, int64_t gi, int64_t groups) {
  const int64_t H = a.heads, N = a.tokens, D = a.dim, tiles = tiles_for(N, groups);
  const HeadDiagonals hd(a.diag, bh % H, N);
  if (gi >= hd.ng) return;
  const T* part = a.partials + bh * a.partial_stride + gi * tiles * (D + 2);
  S* o = a.out.row(bh, H, hd.globs[gi]);
  for (int t : cta.threads()) {
    T m = sv_neg_inf<T>();
    for (int64_t i = 0; i < tiles; ++i) m = sv_max(m, cta.load(t, part + i * (D + 2)));
    T l = T(0);
    for (int64_t i = 0; i < tiles; ++i)
      l = sv_fma(cta.load(t, part + i * (D + 2) + 1), sv_exp(cta.load(t, part + i * (D + 2)) - m), l);
    const T inv = T(1) / l;
    if (t == 0) cta.store(t, a.lse + bh * N + hd.globs[gi], m + sv_log(l));
    for (int64_t d = t; d < D; d += cta.num_threads()) {
      T x = T(0);
      for (int64_t i = 0; i < tiles; ++i)
        x = sv_fma(cta.load(t, part + i * (D + 2) + 2 + d), sv_exp(cta.load(t, part + i * (D + 2)) - m), x);
      S y{};
      from_compute(y, x * inv);
      cta.store(t, o + d, y);
    }
  }
}

// ---- backward, query pass -------------------------------------------------------------------------

// One chunk of keys of query row j: P = exp(scale q.k - lse), dS = P (dO.v - Di), dq += dS k.
template <int kDim, int L, int E, typename Cta, typename T, typename S>
SV_HD void query_chunk(const Cta& cta, int g, const S* qrow, const S* grow, T lse, T di, LaneSlots<LaneRow<T, E>>& dq,
                       const S* const (&kr)[kKeyChunk], const S* const (&vr)[kKeyChunk], const bool (&ok)[kKeyChunk],
                       T scale, int64_t D) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  LaneSlots<T> sp[kKeyChunk], dp[kKeyChunk];
  for (int lane : cta.lanes()) {
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) sp[i][lane] = dp[i][lane] = T(0);
    SV_UNROLL
    for (int c = 0; c < E / per; ++c) {
      T q[per], go[per];
      read_lane_chunk<kDim, L>(q, qrow, lane, c, D);
      read_lane_chunk<kDim, L>(go, grow, lane, c, D);
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!ok[i]) continue;
        T x[per];
        read_lane_chunk<kDim, L>(x, kr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) sp[i][lane] = sv_fma(q[e], x[e], sp[i][lane]);
        read_lane_chunk<kDim, L>(x, vr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) dp[i][lane] = sv_fma(go[e], x[e], dp[i][lane]);
      }
    }
  }
  T ds[kKeyChunk];
  SV_UNROLL
  for (int i = 0; i < kKeyChunk; ++i) {
    ds[i] = T(0);
    if (!ok[i]) continue;
    const T p = sv_exp(cta.group_sum(g, sp[i]) * scale - lse);
    ds[i] = p * (cta.group_sum(g, dp[i]) - di);
  }
  for (int lane : cta.lanes()) {
    SV_UNROLL
    for (int c = 0; c < E / per; ++c) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!ok[i]) continue;
        T k[per];
        read_lane_chunk<kDim, L>(k, kr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) dq[lane].x[c * per + e] = sv_fma(ds[i], k[e], dq[lane].x[c * per + e]);
      }
    }
  }
}

// Query tile `tile`: Di = dO.O of its queries (to the workspace), dq of its non-global queries, and
// its partials of each global row's dq over the tile's own keys.
template <int kDim, typename Cta, typename T, typename S>
SV_HD void backward_query_tile(Cta& cta, const BackwardArgs<T, S>& a, int64_t bh, int64_t tile) {
  using Shape = TileShape<T, kDim>;
  constexpr int E = Shape::kLaneElems, G = Shape::kGroups, L = Shape::kLanes, Q = Shape::kBackwardRows;
  constexpr int64_t P = Shape::kPitch, GQ = static_cast<int64_t>(G) * Q;
  const int64_t H = a.heads, N = a.tokens, D = kDim != 0 ? kDim : a.dim, h = bh % H;
  const HeadDiagonals hd(a.diag, h, N);
  const int64_t nd = hd.nd, ng = hd.ng, t0 = tile * GQ, tiles = tiles_for(N, GQ), n_own = N - t0 < GQ ? N - t0 : GQ;
  const TileSmem<T, S, kDim> lay = query_pass_smem<T, S, kDim>();
  SmemCursor cur{cta.smem()};
  S* oq = cur.template take<S>(lay.own_bytes);
  S* odo = oq + GQ * P;
  S* gk = cur.template take<S>(lay.global_bytes);
  S* gv = gk + kMaxTileGlobals * P;
  S* gq = gv + kMaxTileGlobals * P;
  S* gdo = gq + kMaxTileGlobals * P;
  S* go = gdo + kMaxTileGlobals * P;
  T* gl = reinterpret_cast<T*>(go + kMaxTileGlobals * P);  // lse, Di of the global rows
  GlobalPartials<T> gp(cur, lay.acc_bytes, 1, P, GQ);
  S* const buf0 = cur.template take<S>(2 * lay.stage_bytes);  // the two stage buffers
  auto buf = [&](int which) { return reinterpret_cast<S*>(reinterpret_cast<char*>(buf0) + which * lay.stage_bytes); };
  const int64_t R = lay.stage_rows_n;
  const S* kb = a.k.row(bh, H, 0);
  const S* vb = a.v.row(bh, H, 0);
  const S* qb = a.q.row(bh, H, 0);
  const S* gb = a.grad_out.row(bh, H, 0);
  const S* ob = a.out.row(bh, H, 0);
  const int64_t sk = a.k.stride_n, sv = a.v.stride_n, sq = a.q.stride_n, sg = a.grad_out.stride_n, so = a.out.stride_n;
  T* di_ws = a.workspace + bh * a.workspace_stride;

  auto own = [&](int64_t r) { return t0 + r; };
  auto glob = [&](int64_t r) { return static_cast<int64_t>(hd.globs[r]); };
  stage_tensor(cta, oq, P, qb, sq, n_own, own, D);
  stage_tensor(cta, odo, P, gb, sg, n_own, own, D);
  stage_tensor(cta, gk, P, kb, sk, ng, glob, D);
  stage_tensor(cta, gv, P, vb, sv, ng, glob, D);
  stage_tensor(cta, gq, P, qb, sq, ng, glob, D);
  stage_tensor(cta, gdo, P, gb, sg, ng, glob, D);
  stage_tensor(cta, go, P, ob, so, ng, glob, D);
  for (int t : cta.threads())
    if (t < ng) gl[t] = to_compute(cta.load(t, a.lse + bh * N + hd.globs[t]));
  zero_partials(cta, gp, 1, ng);
  cta.commit();
  cta.wait(0);
  cta.sync();
  // Di of the global rows (group 0), and of each own query (read O once, write Di once).
  const bool ovec = rows_16byte(ob, so, D);
  QuerySlots<T, Q> lse, di;
  QuerySlots<LaneSlots<LaneRow<T, E>>, Q> dq;
  QuerySlots<int64_t, Q> slot;
  for (int g : cta.groups()) {
    LaneSlots<T> part;
    for (int qi = 0; qi < Q; ++qi) {
      const int x = query_slot<Q>(g, qi);
      const int64_t j = t0 + qi * G + g;
      slot[x] = 0;
      for (int lane : cta.lanes()) {
        dq[x][lane].zero();
        part[lane] = T(0);
        if (j >= N) continue;
        LaneRow<T, E> o, gr;
        load_lane_row<kDim, L>(cta, cta.tid(g, lane), o, ob + j * so, lane, D, ovec);
        read_lane<kDim, L>(gr, odo + (j - t0) * P, lane, D);
        part[lane] = row_dot(gr, o);
      }
      di[x] = cta.group_sum(g, part);
      lse[x] = j < N ? cta.load(cta.tid(g, 0), a.lse + bh * N + j) : T(0);
      for (int lane : cta.lanes())
        if (lane == 0 && j < N) cta.store(cta.tid(g, lane), di_ws + j, di[x]);
    }
    if (g == 0)
      for (int64_t gi = 0; gi < ng; ++gi) {
        for (int lane : cta.lanes()) {
          LaneRow<T, E> o, gr;
          read_lane<kDim, L>(o, go + gi * P, lane, D);
          read_lane<kDim, L>(gr, gdo + gi * P, lane, D);
          part[lane] = row_dot(gr, o);
        }
        const T x = cta.group_sum(g, part);
        for (int lane : cta.lanes())
          if (lane == 0) gl[kMaxTileGlobals + gi] = x;
      }
  }
  cta.sync();

  const SliceUnion un{hd.deltas, nd, t0, GQ, N, +1, ng > 0};
  auto issue = [&](int which, int64_t lo, int64_t hi) {
    S* kbuf = buf(which);
    S* vbuf = kbuf + R * P;
    auto rows = [&](int64_t r) { return lo + r; };
    stage_tensor(cta, kbuf, P, kb, sk, hi - lo, rows, D);
    stage_tensor(cta, vbuf, P, vb, sv, hi - lo, rows, D);
  };
  auto use = [&](int which, int64_t lo, int64_t hi) {
    const S* kbuf = buf(which);
    const S* vbuf = kbuf + R * P;
    if (!cta.compute()) return;
    for (int g : cta.groups())
      for (int qi = 0; qi < Q; ++qi) {
      const int x = query_slot<Q>(g, qi);
      const int64_t j = t0 + qi * G + g;
      if (j >= N || hd.isg[j]) continue;
      bool ok[kKeyChunk];
      int64_t at[kKeyChunk];
      while (next_chunk(hd, j, +1, +1, slot[x], lo, hi, ok, at)) {
        const S* kr[kKeyChunk];
        const S* vr[kKeyChunk];
        SV_UNROLL
        for (int i = 0; i < kKeyChunk; ++i) {
          kr[i] = kbuf + at[i] * P;
          vr[i] = vbuf + at[i] * P;
        }
        query_chunk<kDim, L, E>(cta, g, oq + (j - t0) * P, odo + (j - t0) * P, lse[x], di[x], dq[x], kr, vr, ok, a.scale, D);
      }
    }
    // The global rows' dq over the tile's own keys in this stage: dS per group, then per element a
    // sum over the groups in order.
    const int64_t own_lo = t0 > lo ? t0 : lo, own_hi_a = t0 + GQ < hi ? t0 + GQ : hi;
    if (ng == 0 || own_lo >= own_hi_a) return;
    for (int g : cta.groups())
      for (int qi = 0; qi < Q; ++qi) {
      const int64_t r = t0 + qi * G + g;
      const bool in = r >= lo && r < hi;
      for (int64_t gi = 0; gi < ng; ++gi) {
        LaneSlots<T> sp, dp;
        for (int lane : cta.lanes()) {
          sp[lane] = dp[lane] = T(0);
          if (!in) continue;
          LaneRow<T, E> x, y;
          read_lane<kDim, L>(x, gq + gi * P, lane, D);
          read_lane<kDim, L>(y, kbuf + (r - lo) * P, lane, D);
          sp[lane] = row_dot(x, y);
          read_lane<kDim, L>(x, gdo + gi * P, lane, D);
          read_lane<kDim, L>(y, vbuf + (r - lo) * P, lane, D);
          dp[lane] = row_dot(x, y);
        }
        const T p = sv_exp(cta.group_sum(g, sp) * a.scale - gl[gi]);
        const T ds = p * (cta.group_sum(g, dp) - gl[kMaxTileGlobals + gi]);
        for (int lane : cta.lanes())
          if (lane == 0) gp.a[gi * GQ + (r - t0)] = in ? ds : T(0);
      }
    }
    cta.sync();
    for (int t : cta.threads())
      for (int64_t gi = 0; gi < ng; ++gi)
        for (int64_t d = t; d < D; d += cta.num_threads()) {
          T x = gp.row(0, gi)[d];
          for (int64_t g = own_lo - t0; g < own_hi_a - t0; ++g)
            x = sv_fma(gp.a[gi * GQ + g], to_compute(kbuf[(t0 + g - lo) * P + d]), x);
          gp.row(0, gi)[d] = x;
        }
  };
  run_stages(cta, un, R, issue, use);

  const bool qvec = rows_16byte(a.grad_q.row(bh, H, 0), a.grad_q.stride_n, D);
  for (int g : cta.groups())
    for (int qi = 0; qi < Q; ++qi) {
    const int x = query_slot<Q>(g, qi);
    const int64_t j = t0 + qi * G + g;
    if (j >= N || hd.isg[j]) continue;
    if (cta.compute())
      for (int64_t i0 = 0; i0 < ng; i0 += kKeyChunk) {
        const S* kr[kKeyChunk];
        const S* vr[kKeyChunk];
        bool ok[kKeyChunk];
        SV_UNROLL
        for (int i = 0; i < kKeyChunk; ++i) {
          ok[i] = i0 + i < ng;
          kr[i] = gk + (ok[i] ? i0 + i : 0) * P;
          vr[i] = gv + (ok[i] ? i0 + i : 0) * P;
        }
        query_chunk<kDim, L, E>(cta, g, oq + (j - t0) * P, odo + (j - t0) * P, lse[x], di[x], dq[x], kr, vr, ok, a.scale, D);
      }
    for (int lane : cta.lanes())
      store_lane_row<kDim, L>(cta, cta.tid(g, lane), a.grad_q.row(bh, H, j), lane, D, qvec, dq[x][lane], a.scale);
  }
  T* part = a.workspace + bh * a.workspace_stride + N;
  for (int t : cta.threads())
    for (int64_t gi = 0; gi < ng; ++gi)
      for (int64_t d = t; d < D; d += cta.num_threads())
        cta.store(t, part + (gi * tiles + tile) * D + d, gp.row(0, gi)[d]);
}

// ---- backward, key pass ---------------------------------------------------------------------------

// One chunk of queries of key row k (own K, V rows krow, vrow): P and dS recomputed from the
// queries' q, dO, lse and Di; dv += P dO, dk += dS q.
template <int kDim, int L, int E, typename Cta, typename T, typename S>
SV_HD void key_chunk(const Cta& cta, int g, const S* krow, const S* vrow, LaneSlots<LaneRow<T, E>>& dk,
                     LaneSlots<LaneRow<T, E>>& dv, const S* const (&qr)[kKeyChunk], const S* const (&gr)[kKeyChunk],
                     const T (&lse)[kKeyChunk], const T (&di)[kKeyChunk], const bool (&ok)[kKeyChunk], T scale,
                     int64_t D) {
  constexpr int per = 16 / static_cast<int>(sizeof(S));
  LaneSlots<T> sp[kKeyChunk], dp[kKeyChunk];
  for (int lane : cta.lanes()) {
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) sp[i][lane] = dp[i][lane] = T(0);
    SV_UNROLL
    for (int c = 0; c < E / per; ++c) {
      T k[per], v[per];
      read_lane_chunk<kDim, L>(k, krow, lane, c, D);
      read_lane_chunk<kDim, L>(v, vrow, lane, c, D);
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!ok[i]) continue;
        T x[per];
        read_lane_chunk<kDim, L>(x, qr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) sp[i][lane] = sv_fma(x[e], k[e], sp[i][lane]);
        read_lane_chunk<kDim, L>(x, gr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) dp[i][lane] = sv_fma(x[e], v[e], dp[i][lane]);
      }
    }
  }
  T p[kKeyChunk], ds[kKeyChunk];
  SV_UNROLL
  for (int i = 0; i < kKeyChunk; ++i) {
    p[i] = ds[i] = T(0);
    if (!ok[i]) continue;
    p[i] = sv_exp(cta.group_sum(g, sp[i]) * scale - lse[i]);
    ds[i] = p[i] * (cta.group_sum(g, dp[i]) - di[i]);
  }
  for (int lane : cta.lanes()) {
    SV_UNROLL
    for (int c = 0; c < E / per; ++c) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!ok[i]) continue;
        T x[per];
        read_lane_chunk<kDim, L>(x, gr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) dv[lane].x[c * per + e] = sv_fma(p[i], x[e], dv[lane].x[c * per + e]);
        read_lane_chunk<kDim, L>(x, qr[i], lane, c, D);
        SV_UNROLL
        for (int e = 0; e < per; ++e) dk[lane].x[c * per + e] = sv_fma(ds[i], x[e], dk[lane].x[c * per + e]);
      }
    }
  }
}

// Key tile `tile`: dk, dv of its non-global keys (from the diagonal queries, then the global rows),
// and its partials of each global column's dk, dv over the tile's own queries.
template <int kDim, typename Cta, typename T, typename S>
SV_HD void backward_key_tile(Cta& cta, const BackwardArgs<T, S>& a, int64_t bh, int64_t tile) {
  using Shape = TileShape<T, kDim>;
  constexpr int E = Shape::kLaneElems, G = Shape::kGroups, L = Shape::kLanes, Q = Shape::kBackwardRows;
  constexpr int64_t P = Shape::kPitch, GQ = static_cast<int64_t>(G) * Q;
  const int64_t H = a.heads, N = a.tokens, D = kDim != 0 ? kDim : a.dim, h = bh % H;
  const HeadDiagonals hd(a.diag, h, N);
  const int64_t nd = hd.nd, ng = hd.ng, t0 = tile * GQ, tiles = tiles_for(N, GQ), n_own = N - t0 < GQ ? N - t0 : GQ;
  const TileSmem<T, S, kDim> lay = key_pass_smem<T, S, kDim>();
  SmemCursor cur{cta.smem()};
  S* ok_rows = cur.template take<S>(lay.own_bytes);
  S* ov = ok_rows + GQ * P;
  S* gq = cur.template take<S>(lay.global_bytes);
  S* gdo = gq + kMaxTileGlobals * P;
  S* gk = gdo + kMaxTileGlobals * P;
  S* gv = gk + kMaxTileGlobals * P;
  T* gl = reinterpret_cast<T*>(gv + kMaxTileGlobals * P);  // lse, Di of the global rows
  GlobalPartials<T> gp(cur, lay.acc_bytes, 2, P, GQ);
  S* const buf0 = cur.template take<S>(2 * lay.stage_bytes);  // the two stage buffers
  auto buf = [&](int which) { return reinterpret_cast<S*>(reinterpret_cast<char*>(buf0) + which * lay.stage_bytes); };
  const int64_t R = lay.stage_rows_n;
  const S* kb = a.k.row(bh, H, 0);
  const S* vb = a.v.row(bh, H, 0);
  const S* qb = a.q.row(bh, H, 0);
  const S* gb = a.grad_out.row(bh, H, 0);
  const int64_t sk = a.k.stride_n, sv = a.v.stride_n, sq = a.q.stride_n, sg = a.grad_out.stride_n;
  const T* lse_b = a.lse + bh * N;
  const T* di_b = a.workspace + bh * a.workspace_stride;

  auto own = [&](int64_t r) { return t0 + r; };
  auto glob = [&](int64_t r) { return static_cast<int64_t>(hd.globs[r]); };
  stage_tensor(cta, ok_rows, P, kb, sk, n_own, own, D);
  stage_tensor(cta, ov, P, vb, sv, n_own, own, D);
  stage_tensor(cta, gq, P, qb, sq, ng, glob, D);
  stage_tensor(cta, gdo, P, gb, sg, ng, glob, D);
  stage_tensor(cta, gk, P, kb, sk, ng, glob, D);
  stage_tensor(cta, gv, P, vb, sv, ng, glob, D);
  for (int t : cta.threads())
    if (t < ng) {
      gl[t] = cta.load(t, lse_b + hd.globs[t]);
      gl[kMaxTileGlobals + t] = cta.load(t, di_b + hd.globs[t]);
    }
  zero_partials(cta, gp, 2, ng);
  cta.commit();
  cta.wait(0);
  cta.sync();

  QuerySlots<LaneSlots<LaneRow<T, E>>, Q> dk, dv;
  QuerySlots<int64_t, Q> slot;  // counts down: queries k - delta in increasing order
  for (int g : cta.groups())
    for (int qi = 0; qi < Q; ++qi) {
      const int x = query_slot<Q>(g, qi);
      slot[x] = nd - 1;
      for (int lane : cta.lanes()) {
        dk[x][lane].zero();
        dv[x][lane].zero();
      }
    }
  // A stage row: q (P), dO (P), then the stage's lse and Di (R each) after all rows.
  const SliceUnion un{hd.deltas, nd, t0, GQ, N, -1, ng > 0};
  auto issue = [&](int which, int64_t lo, int64_t hi) {
    S* qbuf = buf(which);
    S* gbuf = qbuf + R * P;
    T* lbuf = reinterpret_cast<T*>(gbuf + R * P);
    auto rows = [&](int64_t r) { return lo + r; };
    stage_tensor(cta, qbuf, P, qb, sq, hi - lo, rows, D);
    stage_tensor(cta, gbuf, P, gb, sg, hi - lo, rows, D);
    stage_scalars(cta, lbuf, lse_b + lo, hi - lo);
    stage_scalars(cta, lbuf + R, di_b + lo, hi - lo);
  };
  auto use = [&](int which, int64_t lo, int64_t hi) {
    const S* qbuf = buf(which);
    const S* gbuf = qbuf + R * P;
    const T* lbuf = reinterpret_cast<const T*>(gbuf + R * P);
    if (!cta.compute()) return;
    for (int g : cta.groups())
      for (int qi = 0; qi < Q; ++qi) {
      const int x = query_slot<Q>(g, qi);
      const int64_t k = t0 + qi * G + g;
      if (k >= N || hd.isg[k]) continue;
      bool ok[kKeyChunk];
      int64_t at[kKeyChunk];
      while (next_chunk(hd, k, -1, -1, slot[x], lo, hi, ok, at)) {
        const S* qr[kKeyChunk];
        const S* gr[kKeyChunk];
        T lse[kKeyChunk], di[kKeyChunk];
        SV_UNROLL
        for (int i = 0; i < kKeyChunk; ++i) {
          qr[i] = qbuf + at[i] * P;
          gr[i] = gbuf + at[i] * P;
          lse[i] = lbuf[at[i]];
          di[i] = lbuf[R + at[i]];
        }
        key_chunk<kDim, L, E>(cta, g, ok_rows + (k - t0) * P, ov + (k - t0) * P, dk[x], dv[x], qr, gr, lse, di, ok, a.scale, D);
      }
    }
    // The global columns' dk, dv over the tile's own queries in this stage.
    const int64_t own_lo = t0 > lo ? t0 : lo, own_hi_a = t0 + GQ < hi ? t0 + GQ : hi;
    if (ng == 0 || own_lo >= own_hi_a) return;
    for (int g : cta.groups())
      for (int qi = 0; qi < Q; ++qi) {
      const int64_t j = t0 + qi * G + g;
      const bool in = j >= lo && j < hi;
      for (int64_t gi = 0; gi < ng; ++gi) {
        LaneSlots<T> sp, dp;
        for (int lane : cta.lanes()) {
          sp[lane] = dp[lane] = T(0);
          if (!in) continue;
          LaneRow<T, E> x, y;
          read_lane<kDim, L>(x, qbuf + (j - lo) * P, lane, D);
          read_lane<kDim, L>(y, gk + gi * P, lane, D);
          sp[lane] = row_dot(x, y);
          read_lane<kDim, L>(x, gbuf + (j - lo) * P, lane, D);
          read_lane<kDim, L>(y, gv + gi * P, lane, D);
          dp[lane] = row_dot(x, y);
        }
        const T lse_j = in ? lbuf[j - lo] : T(0), di_j = in ? lbuf[R + j - lo] : T(0);
        const T p = sv_exp(cta.group_sum(g, sp) * a.scale - lse_j);
        const T ds = p * (cta.group_sum(g, dp) - di_j);
        for (int lane : cta.lanes())
          if (lane == 0) {
            gp.a[gi * GQ + (j - t0)] = in ? p : T(0);
            gp.b[gi * GQ + (j - t0)] = in ? ds : T(0);
          }
      }
    }
    cta.sync();
    for (int t : cta.threads())
      for (int64_t gi = 0; gi < ng; ++gi)
        for (int64_t d = t; d < D; d += cta.num_threads()) {
          T xk = gp.row(0, gi)[d], xv = gp.row(1, gi)[d];
          for (int64_t g = own_lo - t0; g < own_hi_a - t0; ++g) {
            xv = sv_fma(gp.a[gi * GQ + g], to_compute(gbuf[(t0 + g - lo) * P + d]), xv);
            xk = sv_fma(gp.b[gi * GQ + g], to_compute(qbuf[(t0 + g - lo) * P + d]), xk);
          }
          gp.row(0, gi)[d] = xk;
          gp.row(1, gi)[d] = xv;
        }
  };
  run_stages(cta, un, R, issue, use);

  const bool kvec = rows_16byte(a.grad_k.row(bh, H, 0), a.grad_k.stride_n, D);
  const bool vvec = rows_16byte(a.grad_v.row(bh, H, 0), a.grad_v.stride_n, D);
  for (int g : cta.groups())
    for (int qi = 0; qi < Q; ++qi) {
    const int x = query_slot<Q>(g, qi);
    const int64_t k = t0 + qi * G + g;
    if (k >= N || hd.isg[k]) continue;
    if (cta.compute())
      for (int64_t i0 = 0; i0 < ng; i0 += kKeyChunk) {  // the global query rows
        const S* qr[kKeyChunk];
        const S* gr[kKeyChunk];
        T lse[kKeyChunk], di[kKeyChunk];
        bool ok[kKeyChunk];
        SV_UNROLL
        for (int i = 0; i < kKeyChunk; ++i) {
          ok[i] = i0 + i < ng;
          const int64_t gi = ok[i] ? i0 + i : 0;
          qr[i] = gq + gi * P;
          gr[i] = gdo + gi * P;
          lse[i] = gl[gi];
          di[i] = gl[kMaxTileGlobals + gi];
        }
        key_chunk<kDim, L, E>(cta, g, ok_rows + (k - t0) * P, ov + (k - t0) * P, dk[x], dv[x], qr, gr, lse, di, ok, a.scale, D);
      }
    for (int lane : cta.lanes()) {
      store_lane_row<kDim, L>(cta, cta.tid(g, lane), a.grad_v.row(bh, H, k), lane, D, vvec, dv[x][lane], T(1));
      store_lane_row<kDim, L>(cta, cta.tid(g, lane), a.grad_k.row(bh, H, k), lane, D, kvec, dk[x][lane], a.scale);
    }
  }
  T* part = a.workspace + bh * a.workspace_stride + N + ng * tiles * D;
  for (int t : cta.threads())
    for (int64_t gi = 0; gi < ng; ++gi)
      for (int64_t d = t; d < D; d += cta.num_threads()) {
        cta.store(t, part + (gi * tiles + tile) * 2 * D + d, gp.row(0, gi)[d]);
        cta.store(t, part + (gi * tiles + tile) * 2 * D + D + d, gp.row(1, gi)[d]);
      }
}

// Global token gi of batch-head bh: dq of its row, dk and dv of its column, each its tiles' partials
// summed in tile order.
template <typename Cta, typename T, typename S>
SV_HD void backward_merge(Cta& cta, const BackwardArgs<T, S>& a, int64_t bh, int64_t gi, int64_t groups) {
  const int64_t H = a.heads, N = a.tokens, D = a.dim, tiles = tiles_for(N, groups);
  const HeadDiagonals hd(a.diag, bh % H, N);
  if (gi >= hd.ng) return;
  const int64_t ng = hd.ng, token = hd.globs[gi];
  const T* dq_part = a.workspace + bh * a.workspace_stride + N + gi * tiles * D;
  const T* kv_part = a.workspace + bh * a.workspace_stride + N + ng * tiles * D + gi * tiles * 2 * D;
  for (int t : cta.threads())
    for (int64_t d = t; d < D; d += cta.num_threads()) {
      T q = T(0), k = T(0), v = T(0);
      for (int64_t i = 0; i < tiles; ++i) {
        q += cta.load(t, dq_part + i * D + d);
        k += cta.load(t, kv_part + i * 2 * D + d);
        v += cta.load(t, kv_part + i * 2 * D + D + d);
      }
      S s;
      from_compute(s, q * a.scale);
      cta.store(t, a.grad_q.row(bh, H, token) + d, s);
      from_compute(s, k * a.scale);
      cta.store(t, a.grad_k.row(bh, H, token) + d, s);
      from_compute(s, v);
      cta.store(t, a.grad_v.row(bh, H, token) + d, s);
    }
}

}  // namespace sparsevit::ops::cuda
