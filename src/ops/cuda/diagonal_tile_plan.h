// The geometry of the tiled diagonal kernels (docs/gpu.md, "Design: tiles of consecutive queries"),
// shared by the CUDA kernels, their host emulation and the torch glue (workspace sizes):
// how many lanes hold a row, how many queries a tile has, how many rows a stage buffer holds, and
// which rows a tile stages (the union of its offsets' slices, cut into stages of consecutive rows).
#pragma once

#include <cstdint>

#include "ops/cuda/attention_tile_math.h"

namespace sparsevit::ops::cuda {

// Global tokens a tiled launch takes per head (more: the op uses the CSR kernel).
constexpr int kMaxTileGlobals = 4;

// T: compute type; kDim: 64, 128, or 0 (any D <= 128, elements past D masked).
template <typename T, int kDim>
struct TileShape {
  static constexpr int kLaneElems = sizeof(T) == 8 ? 8 : 16;       // E: elements a lane holds
  static constexpr int kPitch = kDim == 0 ? 128 : kDim;           // elements a group holds (smem row pitch)
  static constexpr int kLanes = kPitch / kLaneElems;              // L: lanes per query
  static constexpr int kThreads = 512;                            // 128 registers a thread
  static constexpr int kGroups = kThreads / kLanes;               // G: groups of a CTA
  // Queries (keys) per group, each with its accumulators in registers: a tile is G * Q rows.
  // Several rows per thread share the thread's temporaries, so wide tiles fit the register file.
  static constexpr int kForwardQueries = sizeof(T) == 8 ? 2 : 4;
  static constexpr int kBackwardRows = sizeof(T) == 8 ? 1 : 2;
  static_assert(kLanes >= 1 && kLanes <= kWarpLanes && (kLanes & (kLanes - 1)) == 0, "lanes: a power of 2");
};

SV_HD int64_t tiles_for(int64_t n, int64_t groups) { return (n + groups - 1) / groups; }

// The rows a tile [t0, t0 + G) reaches: r in [0, N) with r - sign*delta in [t0, t0 + G) for one of
// the deltas (sign +1: a query tile's keys; -1: a key tile's queries), plus the tile's own rows when
// `own` (the global rows' and columns' partials need them). stage() returns them in increasing
// order, as runs of consecutive rows of at most `max_rows`.
struct SliceUnion {
  const int32_t* deltas;
  int64_t nd, t0, groups, tokens;
  int sign;
  bool own;

  SV_HD void slice(int64_t i, int64_t& a, int64_t& b) const {
    const int64_t start = i < nd ? t0 + sign * static_cast<int64_t>(deltas[i]) : t0;
    a = start < 0 ? 0 : start;
    b = start + groups > tokens ? tokens : start + groups;
  }
  SV_HD int64_t slices() const { return nd + (own ? 1 : 0); }
  // The next stage at or after row `from`: [lo, hi); false when no row is left.
  SV_HD bool stage(int64_t from, int64_t max_rows, int64_t& lo, int64_t& hi) const {
    lo = tokens;
    for (int64_t i = 0; i < slices(); ++i) {
      int64_t a, b;
      slice(i, a, b);
      if (b > from && b > a) {
        const int64_t s = a > from ? a : from;
        if (s < lo) lo = s;
      }
    }
    if (lo >= tokens) return false;
    hi = lo + 1;
    for (bool grew = true; grew;) {  // extend over every slice that overlaps or touches the run
      grew = false;
      for (int64_t i = 0; i < slices(); ++i) {
        int64_t a, b;
        slice(i, a, b);
        if (a <= hi && b > hi) {
          hi = b;
          grew = true;
        }
      }
    }
    if (hi - lo > max_rows) hi = lo + max_rows;
    return true;
  }
};

// Whether a pattern runs the tiled kernels: a diagonal union with at most kMaxTileGlobals global
// tokens per head, D = 64 or 128, float32 compute (fp32 and bf16 storage): the shapes that compile
// without register spills. Any other D, and float64, take the per-row CSR kernels (the generic
// fallback).
template <typename T>
SV_HD bool tiled_launch(bool diagonal, int64_t max_globals, int64_t dim) {
  return sizeof(T) == 4 && diagonal && max_globals <= kMaxTileGlobals && (dim == 64 || dim == 128);
}

// Queries (keys) per tile for a head size: the specialised shapes for D = 64 and 128, else the
// generic one. The launchers and the glue's workspace sizes both use it.
template <typename T>
SV_HD int64_t tile_groups(int64_t dim) {
  return dim == 64 ? TileShape<T, 64>::kGroups : dim == 128 ? TileShape<T, 128>::kGroups : TileShape<T, 0>::kGroups;
}

// Workspace of the tiled launches, in T elements per (batch, head): the forward's per-tile partials
// of each global row (m, l, acc[D]); the backward's Di = dO.O per query, then the per-tile partials
// of each global row's dq (D) and of each global column's dk, dv (2D).
template <typename T>
SV_HD int64_t forward_tile_queries(int64_t dim) {
  return tile_groups<T>(dim) * TileShape<T, 0>::kForwardQueries;
}
template <typename T>
SV_HD int64_t backward_tile_rows(int64_t dim) {
  return tile_groups<T>(dim) * TileShape<T, 0>::kBackwardRows;
}
template <typename T>
SV_HD int64_t forward_partials_per_head(int64_t tokens, int64_t dim, int64_t globals) {
  return globals * tiles_for(tokens, forward_tile_queries<T>(dim)) * (dim + 2);
}
template <typename T>
SV_HD int64_t backward_workspace_per_head(int64_t tokens, int64_t dim, int64_t globals) {
  return tokens + globals * tiles_for(tokens, backward_tile_rows<T>(dim)) * 3 * dim;
}

// Shared memory of a tiled kernel with tiles of `tile` rows: `own` tensors' rows of the tile,
// `global_tensors` rows per global token (kMaxTileGlobals of them) plus two scalars each, the
// per-global partial accumulators (`acc_rows` rows of P values of T) and two score arrays of
// `tile`, then the two stage buffers, each sized so that the whole fits kSmemBudget. Every piece
// is padded to 16 bytes.
constexpr int64_t kSmemBudget = 160 * 1024;  // under sm_80's 163 KB a block (sm_90: 227 KB)

SV_HD int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

template <typename T, typename S, int kDim>
struct TileSmem {
  using Shape = TileShape<T, kDim>;
  int64_t own_bytes, global_bytes, acc_bytes, stage_row_bytes, stage_rows_n, stage_bytes;
  int stage_tensors, stage_scalars;
  SV_HD TileSmem(int64_t tile, int own, int global_tensors, int acc_rows, int stage_tensors_, int stage_scalars_)
      : stage_tensors(stage_tensors_), stage_scalars(stage_scalars_) {
    constexpr int64_t P = Shape::kPitch;
    own_bytes = align16(own * tile * P * static_cast<int64_t>(sizeof(S)));
    global_bytes = align16(global_tensors * kMaxTileGlobals * P * static_cast<int64_t>(sizeof(S)) +
                           2 * kMaxTileGlobals * static_cast<int64_t>(sizeof(T)));
    acc_bytes = align16((acc_rows * kMaxTileGlobals * (P + 2) + 2 * kMaxTileGlobals * tile + 2 * kMaxTileGlobals) *
                        static_cast<int64_t>(sizeof(T)));
    stage_row_bytes = stage_tensors * P * static_cast<int64_t>(sizeof(S)) + stage_scalars * static_cast<int64_t>(sizeof(T));
    stage_rows_n = (kSmemBudget - own_bytes - global_bytes - acc_bytes) / (2 * stage_row_bytes);
    stage_bytes = align16(stage_rows_n * stage_row_bytes);
  }
  SV_HD int64_t total() const { return own_bytes + global_bytes + acc_bytes + 2 * stage_bytes; }
};

// The three tiled kernels' layouts: forward (stage K, V; globals K, V, q), backward query pass
// (own q, dO; stage K, V; globals K, V, q, dO, O), backward key pass (own K, V; stage q, dO, lse,
// Di; globals q, dO, K, V).
template <typename T, typename S, int kDim>
SV_HD TileSmem<T, S, kDim> forward_smem() {
  using Sh = TileShape<T, kDim>;
  return TileSmem<T, S, kDim>(Sh::kGroups * Sh::kForwardQueries, 1, 3, 1, 2, 0);
}
template <typename T, typename S, int kDim>
SV_HD TileSmem<T, S, kDim> query_pass_smem() {
  using Sh = TileShape<T, kDim>;
  return TileSmem<T, S, kDim>(Sh::kGroups * Sh::kBackwardRows, 2, 5, 1, 2, 0);
}
template <typename T, typename S, int kDim>
SV_HD TileSmem<T, S, kDim> key_pass_smem() {
  using Sh = TileShape<T, kDim>;
  return TileSmem<T, S, kDim>(Sh::kGroups * Sh::kBackwardRows, 2, 4, 2, 2, 2);
}

}  // namespace sparsevit::ops::cuda
