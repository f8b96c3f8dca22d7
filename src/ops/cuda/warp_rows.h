// The work of one warp on one row, shared by the CUDA kernels (a DeviceWarp: one lane per thread,
// shuffles) and the host emulation (an EmulatedWarp: the 32 lanes in a loop, shuffles on arrays):
// forward rows, the backward's query rows (dq, and P / dS per edge) and key rows (dk, dv from the
// stored P / dS, over the transposed CSR: each output row written by one warp, terms summed in an
// order fixed by the pattern, no atomics, so reruns are bit-identical), for the general CSR kernel
// and the diagonal one. A Warp provides lanes() (the lanes this code runs for) and sum(PerLane<T>)
// (the xor butterfly of attention_tile_math.h; the same value on every lane).
//
// Which keys a row visits, in which order, is a Source: next(e) fills the kKeyChunk positions of
// the next chunk, some of them masked (valid = false: outside [0, N), a global token's own slot,
// past the row's end), and returns false once the row is done. An edge names its token and where
// its P / dS live (a CSR edge position, or a diagonal slot entry s*N + j). The index math and masks
// are in the sources. Chunk positions are fixed (no compaction), so every per-chunk array is
// indexed by constants after unrolling and lives in registers.
#pragma once

#include "ops/cuda/attention_tile_math.h"
#include "ops/cuda/cuda_kernel_params.h"

namespace sparsevit::ops::cuda {

struct Edge {
  int64_t token;  // the key (query pass, forward) or the query (key pass)
  int64_t idx;    // where its P / dS live: CSR edge position, or slot entry s*N + j
  bool in_slots;  // idx indexes the diagonal slot buffers, not the per-edge ones
  bool valid;     // a masked position of the chunk: nothing is read for it
};
constexpr Edge kMaskedEdge = Edge{0, 0, false, false};

// ---- tiling: which row a warp owns ------------------------------------------------------------

SV_HD int64_t warp_row(int64_t block, int warp_in_block) { return block * kWarpsPerBlock + warp_in_block; }
inline int64_t blocks_for_rows(int64_t rows) { return (rows + kWarpsPerBlock - 1) / kWarpsPerBlock; }

// ---- sources ----------------------------------------------------------------------------------

// Query row j of head h: its CSR keys in the listed order.
struct CsrRowSource {
  const int32_t* cols;
  int64_t t, end;
  template <typename A>
  SV_HD CsrRowSource(const A& a, int64_t h, int64_t j) {
    const int32_t* rp = a.row_ptr + h * (a.tokens + 1);
    cols = a.col_idx + h * a.nnz_stride;
    t = rp[j];
    end = rp[j + 1];
  }
  SV_HD bool next(Edge* e) {
    if (t >= end) return false;
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) e[i] = t + i < end ? Edge{cols[t + i], t + i, false, true} : kMaskedEdge;
    t += kKeyChunk;
    return true;
  }
};

// Key row k of head h: its queries over the transposed CSR, in increasing query order.
struct CsrKeySource {
  const int32_t* queries;
  const int32_t* edges;
  int64_t t, end;
  template <typename A>
  SV_HD CsrKeySource(const A& a, int64_t h, int64_t k) {
    const int32_t* trp = a.t_row_ptr + h * (a.tokens + 1);
    queries = a.t_query + h * a.nnz_stride;
    edges = a.t_edge + h * a.nnz_stride;
    t = trp[k];
    end = trp[k + 1];
  }
  SV_HD bool next(Edge* e) {
    if (t >= end) return false;
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i)
      e[i] = t + i < end ? Edge{queries[t + i], edges[t + i], false, true} : kMaskedEdge;
    t += kKeyChunk;
    return true;
  }
};

// One head's diagonal structure.
struct HeadDiagonals {
  const int32_t* deltas;
  int64_t nd;
  const int32_t* globs;
  int64_t ng;
  const uint8_t* isg;
  const int32_t* gpos;  // global row i's CSR position of key k at i*N + k
  int64_t n_tokens;
  SV_HD HeadDiagonals(const DiagonalPlanView& d, int64_t h, int64_t N) : n_tokens(N) {
    deltas = d.deltas + d.delta_ptr[h];
    nd = d.delta_ptr[h + 1] - d.delta_ptr[h];
    globs = d.globals + d.global_ptr[h];
    ng = d.global_ptr[h + 1] - d.global_ptr[h];
    isg = d.is_global + h * N;
    gpos = d.global_pos + static_cast<int64_t>(d.global_ptr[h]) * N;
  }
};

// Non-global query row j: slot s < nd is the key j + delta_s (an edge when it lies in [0, N) and is
// not a global token, whose column has a slot of its own), slot nd + i the global token i. P / dS
// go to slot entry s*N + j.
struct DiagRowSource {
  HeadDiagonals hd;
  int64_t j, s;
  SV_HD DiagRowSource(const HeadDiagonals& d, int64_t j_) : hd(d), j(j_), s(0) {}
  SV_HD bool next(Edge* e) {
    const int64_t N = hd.n_tokens, steps = hd.nd + hd.ng;
    if (s >= steps) return false;
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) {
      const int64_t slot = s + i;
      e[i] = kMaskedEdge;
      if (slot >= steps) continue;
      const int64_t k = slot < hd.nd ? j + hd.deltas[slot] : hd.globs[slot - hd.nd];
      if (slot < hd.nd && (k < 0 || k >= N || hd.isg[k])) continue;
      e[i] = Edge{k, slot * N + j, true, true};
    }
    s += kKeyChunk;
    return true;
  }
};

// Key row k: first its non-global queries from the slot buffers (a non-global key: query k - delta_s
// of slot s, in slot order; a global key i: every non-global query, in order, from slot nd + i), then
// the global query rows in order from the per-edge buffers (their CSR position of k). A chunk never
// spans the two phases.
struct DiagKeySource {
  HeadDiagonals hd;
  int64_t k, i;
  int64_t global_slot;  // -1, or the slot of global key k
  bool in_globals;      // the second phase: the global query rows
  SV_HD DiagKeySource(const HeadDiagonals& d, int64_t k_) : hd(d), k(k_), i(0), global_slot(-1), in_globals(false) {
    if (hd.isg[k]) {
      int64_t gi = 0;
      while (hd.globs[gi] != k) ++gi;
      global_slot = hd.nd + gi;
    }
  }
  SV_HD bool next(Edge* e) {
    const int64_t N = hd.n_tokens;
    if (!in_globals) {
      const int64_t limit = global_slot < 0 ? hd.nd : N;
      if (i >= limit) {
        in_globals = true;
        i = 0;
      } else {
        SV_UNROLL
        for (int c = 0; c < kKeyChunk; ++c) {
          const int64_t at = i + c;
          const int64_t j = global_slot < 0 ? k - hd.deltas[at < limit ? at : 0] : at;
          const int64_t slot = global_slot < 0 ? at : global_slot;
          e[c] = at < limit && j >= 0 && j < N && !hd.isg[j] ? Edge{j, slot * N + j, true, true} : kMaskedEdge;
        }
        i += kKeyChunk;
        return true;
      }
    }
    if (i >= hd.ng) return false;
    SV_UNROLL
    for (int c = 0; c < kKeyChunk; ++c)
      e[c] = i + c < hd.ng ? Edge{hd.globs[i + c], hd.gpos[(i + c) * N + k], false, true} : kMaskedEdge;
    i += kKeyChunk;
    return true;
  }
};

// ---- the rows ---------------------------------------------------------------------------------

// out[j] and lse[j] of query row j of batch-head bh over the keys of `src` (online softmax).
template <typename Warp, typename T, typename S, typename Source>
SV_HD void forward_row(const Warp& w, const ForwardArgs<T, S>& a, int64_t bh, int64_t j, Source src) {
  const int64_t H = a.heads, D = a.dim;
  const bool pl = a.pair_loads;
  const S* kb = a.k.row(bh, H, 0);
  const S* vb = a.v.row(bh, H, 0);
  const int64_t sk = a.k.stride_n, sv = a.v.stride_n;
  PerLane<LaneVec<T>> q, acc;
  for (int lane : w.lanes()) {
    q[lane] = load_lane<T>(a.q.row(bh, H, j), lane, D, pl);
    acc[lane].zero();
  }
  OnlineSoftmax<T> sm;
  Edge e[kKeyChunk];
  while (src.next(e)) {
    PerLane<T> part[kKeyChunk];
    for (int lane : w.lanes()) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i)
        if (e[i].valid) part[i][lane] = lane_dot(q[lane], load_lane<T>(kb + e[i].token * sk, lane, D, pl));
    }
    T s[kKeyChunk], pw[kKeyChunk];
    bool ok[kKeyChunk];
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) {
      ok[i] = e[i].valid;
      s[i] = ok[i] ? w.sum(part[i]) * a.scale : T(0);
    }
    const T c = sm.update(s, ok, pw);
    for (int lane : w.lanes()) {
      lane_scale(acc[lane], c);
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i)
        if (e[i].valid) lane_axpy(acc[lane], pw[i], load_lane<T>(vb + e[i].token * sv, lane, D, pl));
    }
  }
  const bool has_keys = sm.l > T(0);  // the largest score's weight is exp(0) = 1
  const T inv = has_keys ? T(1) / sm.l : T(0);
  S* o = a.out.row(bh, H, j);
  for (int lane : w.lanes()) {
    store_lane(o, lane, D, pl, acc[lane], inv);
    if (lane == 0) a.lse[bh * a.tokens + j] = has_keys ? sm.lse() : sv_neg_inf<T>();
  }
}

// Query row j: P = exp(scale q.k - lse), dS = P (dO.v - dO.O) to the buffers, dq = scale sum dS k.
// Each key row is loaded once (kept in registers from q.k to the dq update).
template <typename Warp, typename T, typename S, typename Source>
SV_HD void backward_query_row(const Warp& w, const BackwardArgs<T, S>& a, int64_t bh, int64_t j, Source src) {
  const int64_t H = a.heads, D = a.dim, N = a.tokens;
  const bool pl = a.pair_loads;
  const S* kb = a.k.row(bh, H, 0);
  const S* vb = a.v.row(bh, H, 0);
  const int64_t sk = a.k.stride_n, sv = a.v.stride_n;
  T* edge_p = a.edge_p + bh * a.nnz_stride;
  T* edge_ds = a.edge_ds + bh * a.nnz_stride;
  T* slot_p = a.slot_p + bh * a.slot_stride;
  T* slot_ds = a.slot_ds + bh * a.slot_stride;
  PerLane<LaneVec<T>> q, g, dq;
  PerLane<T> di_part;
  for (int lane : w.lanes()) {
    q[lane] = load_lane<T>(a.q.row(bh, H, j), lane, D, pl);
    g[lane] = load_lane<T>(a.grad_out.row(bh, H, j), lane, D, pl);
    di_part[lane] = lane_dot(g[lane], load_lane<T>(a.out.row(bh, H, j), lane, D, pl));
    dq[lane].zero();
  }
  const T di = w.sum(di_part);
  const T lse = a.lse[bh * N + j];
  Edge e[kKeyChunk];
  while (src.next(e)) {
    PerLane<LaneVec<T>> kr[kKeyChunk];
    PerLane<T> s_part[kKeyChunk], dp_part[kKeyChunk];
    for (int lane : w.lanes()) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!e[i].valid) continue;
        kr[i][lane] = load_lane<T>(kb + e[i].token * sk, lane, D, pl);
        s_part[i][lane] = lane_dot(q[lane], kr[i][lane]);
        dp_part[i][lane] = lane_dot(g[lane], load_lane<T>(vb + e[i].token * sv, lane, D, pl));
      }
    }
    T ds[kKeyChunk];
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) {
      if (!e[i].valid) continue;
      const T p = sv_exp(w.sum(s_part[i]) * a.scale - lse);
      ds[i] = p * (w.sum(dp_part[i]) - di);
      for (int lane : w.lanes()) {
        if (lane != 0) continue;
        (e[i].in_slots ? slot_p : edge_p)[e[i].idx] = p;
        (e[i].in_slots ? slot_ds : edge_ds)[e[i].idx] = ds[i];
      }
    }
    for (int lane : w.lanes()) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i)
        if (e[i].valid) lane_axpy(dq[lane], ds[i], kr[i][lane]);
    }
  }
  S* dqr = a.grad_q.row(bh, H, j);
  for (int lane : w.lanes()) store_lane(dqr, lane, D, pl, dq[lane], a.scale);
}

// Key row k: dv = sum P dO_j, dk = scale sum dS q_j over the queries of `src`, from the buffers the
// query pass wrote (so it runs after the whole query pass).
template <typename Warp, typename T, typename S, typename Source>
SV_HD void backward_key_row(const Warp& w, const BackwardArgs<T, S>& a, int64_t bh, int64_t k, Source src) {
  const int64_t H = a.heads, D = a.dim;
  const bool pl = a.pair_loads;
  const S* qb = a.q.row(bh, H, 0);
  const S* gb = a.grad_out.row(bh, H, 0);
  const int64_t sq = a.q.stride_n, sg = a.grad_out.stride_n;
  const T* edge_p = a.edge_p + bh * a.nnz_stride;
  const T* edge_ds = a.edge_ds + bh * a.nnz_stride;
  const T* slot_p = a.slot_p + bh * a.slot_stride;
  const T* slot_ds = a.slot_ds + bh * a.slot_stride;
  PerLane<LaneVec<T>> dk, dv;
  for (int lane : w.lanes()) {
    dk[lane].zero();
    dv[lane].zero();
  }
  Edge e[kKeyChunk];
  while (src.next(e)) {
    T p[kKeyChunk], ds[kKeyChunk];
    SV_UNROLL
    for (int i = 0; i < kKeyChunk; ++i) {
      if (!e[i].valid) continue;
      p[i] = (e[i].in_slots ? slot_p : edge_p)[e[i].idx];
      ds[i] = (e[i].in_slots ? slot_ds : edge_ds)[e[i].idx];
    }
    for (int lane : w.lanes()) {
      SV_UNROLL
      for (int i = 0; i < kKeyChunk; ++i) {
        if (!e[i].valid) continue;
        lane_axpy(dv[lane], p[i], load_lane<T>(gb + e[i].token * sg, lane, D, pl));
        lane_axpy(dk[lane], ds[i], load_lane<T>(qb + e[i].token * sq, lane, D, pl));
      }
    }
  }
  S* dvr = a.grad_v.row(bh, H, k);
  S* dkr = a.grad_k.row(bh, H, k);
  for (int lane : w.lanes()) {
    store_lane(dvr, lane, D, pl, dv[lane], T(1));
    store_lane(dkr, lane, D, pl, dk[lane], a.scale);
  }
}

// ---- one warp's row, per kernel: (bh, j) from the flat row index, and its source ------------------

template <typename Warp, typename T, typename S>
SV_HD void forward_csr_warp(const Warp& w, const ForwardArgs<T, S>& a, int64_t row) {
  const int64_t bh = row / a.tokens, j = row - bh * a.tokens;
  forward_row(w, a, bh, j, CsrRowSource(a, bh % a.heads, j));
}

// Global query rows (full rows) take the CSR path, the others their diagonals.
template <typename Warp, typename T, typename S>
SV_HD void forward_diagonal_warp(const Warp& w, const ForwardArgs<T, S>& a, int64_t row) {
  const int64_t bh = row / a.tokens, j = row - bh * a.tokens, h = bh % a.heads;
  const HeadDiagonals hd(a.diag, h, a.tokens);
  if (hd.isg[j]) {
    forward_row(w, a, bh, j, CsrRowSource(a, h, j));
  } else {
    forward_row(w, a, bh, j, DiagRowSource(hd, j));
  }
}

template <typename Warp, typename T, typename S>
SV_HD void backward_query_csr_warp(const Warp& w, const BackwardArgs<T, S>& a, int64_t row) {
  const int64_t bh = row / a.tokens, j = row - bh * a.tokens;
  backward_query_row(w, a, bh, j, CsrRowSource(a, bh % a.heads, j));
}

template <typename Warp, typename T, typename S>
SV_HD void backward_query_diagonal_warp(const Warp& w, const BackwardArgs<T, S>& a, int64_t row) {
  const int64_t bh = row / a.tokens, j = row - bh * a.tokens, h = bh % a.heads;
  const HeadDiagonals hd(a.diag, h, a.tokens);
  if (hd.isg[j]) {
    backward_query_row(w, a, bh, j, CsrRowSource(a, h, j));
  } else {
    backward_query_row(w, a, bh, j, DiagRowSource(hd, j));
  }
}

template <typename Warp, typename T, typename S>
SV_HD void backward_key_csr_warp(const Warp& w, const BackwardArgs<T, S>& a, int64_t row) {
  const int64_t bh = row / a.tokens, k = row - bh * a.tokens;
  backward_key_row(w, a, bh, k, CsrKeySource(a, bh % a.heads, k));
}

template <typename Warp, typename T, typename S>
SV_HD void backward_key_diagonal_warp(const Warp& w, const BackwardArgs<T, S>& a, int64_t row) {
  const int64_t bh = row / a.tokens, k = row - bh * a.tokens;
  backward_key_row(w, a, bh, k, DiagKeySource(HeadDiagonals(a.diag, bh % a.heads, a.tokens), k));
}

}  // namespace sparsevit::ops::cuda
