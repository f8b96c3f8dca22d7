// The emulated launches: the tiled diagonal kernels CTA by CTA (EmulatedCta, the grid of
// sparse_attention_kernels.cu: one CTA per (batch-head, tile), then the merges of the global
// tokens), and the per-row kernels warp by warp (blocks of kWarpsPerBlock warps, one row per warp,
// the 32 lanes in a loop, sum() the shuffle butterfly over an array).
#include "ops/cuda/host_emulation.h"

#include "ops/cuda/diagonal_tiles.h"
#include "ops/cuda/emulated_cta.h"
#include "ops/cuda/warp_rows.h"

namespace sparsevit::ops::cuda {
namespace {

// Threads of a merge CTA (one per (batch-head, global token)).
constexpr int kMergeThreads = 128;

struct EmulatedWarp {
  LaneRange lanes() const { return {0, kWarpLanes}; }
  // __shfl_xor_sync level by level: lane l takes butterfly_combine(its value, lane l ^ offset's).
  template <typename T>
  T sum(const PerLane<T>& x) const {
    T v[kWarpLanes], next[kWarpLanes];
    for (int l = 0; l < kWarpLanes; ++l) v[l] = x[l];
    for (int level = 0; level < kButterflyLevels; ++level) {
      const int offset = butterfly_offset(level);
      for (int l = 0; l < kWarpLanes; ++l) next[l] = butterfly_combine(v[l], v[l ^ offset]);
      for (int l = 0; l < kWarpLanes; ++l) v[l] = next[l];
    }
    return v[0];
  }
};

// Every warp of the grid that covers `rows`, in block order (warps are independent: no shared
// memory, no inter-warp communication, so the order of emulation does not change any value).
template <typename F>
void for_each_warp(int64_t rows, F&& warp_fn) {
  const int64_t blocks = blocks_for_rows(rows);
  for (int64_t b = 0; b < blocks; ++b)
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      const int64_t row = warp_row(b, w);
      if (row < rows) warp_fn(EmulatedWarp{}, row);
    }
}

// ---- the per-row kernels' traffic, modelled from their key walks ----------------------------------

// A warp's load of a whole row reads every sector the row touches once; a scalar read by all lanes
// (P, dS, lse) one sector; writes count their bytes.
struct RowTraffic {
  MemoryTraffic t;
  template <typename S>
  void row(const S* p, int64_t D) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    t.sectors_read += static_cast<int64_t>(((a + D * sizeof(S) - 1) >> 5) - (a >> 5) + 1);
  }
  void scalar() { ++t.sectors_read; }
  void write(int64_t bytes) { t.bytes_written += bytes; }
};

// Calls f(source) with the key walk the per-row kernel uses for query row j of batch-head bh.
template <typename A, typename F>
void with_row_source(const A& a, bool diagonal, int64_t bh, int64_t j, F&& f) {
  const int64_t h = bh % a.heads;
  if (!diagonal) return f(CsrRowSource(a, h, j));
  const HeadDiagonals hd(a.diag, h, a.tokens);
  if (hd.isg[j]) return f(CsrRowSource(a, h, j));
  f(DiagRowSource(hd, j));
}

// Calls f(key token) for every kept key of query row (bh, j), in the per-row kernels' walk order.
template <typename Args, typename F>
void for_each_key(const Args& a, bool diagonal, int64_t bh, int64_t j, F f) {
  with_row_source(a, diagonal, bh, j, [&](auto src) {
    Edge e[kKeyChunk];
    while (src.next(e))
      for (const Edge& x : e)
        if (x.valid) f(x.token);
  });
}

template <typename T, typename S>
MemoryTraffic row_forward_traffic(const ForwardArgs<T, S>& a, bool diagonal) {
  RowTraffic m;
  const int64_t H = a.heads, N = a.tokens, D = a.dim;
  for (int64_t row = 0; row < a.rows(); ++row) {
    const int64_t bh = row / N, j = row - bh * N;
    m.row(a.q.row(bh, H, j), D);
    for_each_key(a, diagonal, bh, j, [&](int64_t k) {
      m.row(a.k.row(bh, H, k), D);
      m.row(a.v.row(bh, H, k), D);
    });
    m.write(D * static_cast<int64_t>(sizeof(S)) + static_cast<int64_t>(sizeof(T)));
  }
  return m.t;
}

template <typename T, typename S>
MemoryTraffic row_backward_traffic(const BackwardArgs<T, S>& a, bool diagonal) {
  RowTraffic m;
  const int64_t H = a.heads, N = a.tokens, D = a.dim, row_bytes = D * static_cast<int64_t>(sizeof(S));
  for (int64_t row = 0; row < a.rows(); ++row) {  // the query pass
    const int64_t bh = row / N, j = row - bh * N;
    m.row(a.q.row(bh, H, j), D);
    m.row(a.grad_out.row(bh, H, j), D);
    m.row(a.out.row(bh, H, j), D);
    m.scalar();
    for_each_key(a, diagonal, bh, j, [&](int64_t k) {
      m.row(a.k.row(bh, H, k), D);
      m.row(a.v.row(bh, H, k), D);
      m.write(2 * static_cast<int64_t>(sizeof(T)));  // P and dS of the edge
    });
    m.write(row_bytes);
  }
  for (int64_t row = 0; row < a.rows(); ++row) {  // the key pass
    const int64_t bh = row / N, k = row - bh * N, h = bh % H;
    auto walk = [&](auto src) {
      Edge e[kKeyChunk];
      while (src.next(e))
        for (const Edge& x : e)
          if (x.valid) {
            m.scalar();
            m.scalar();
            m.row(a.grad_out.row(bh, H, x.token), D);
            m.row(a.q.row(bh, H, x.token), D);
          }
    };
    if (diagonal) {
      walk(DiagKeySource(HeadDiagonals(a.diag, h, N), k));
    } else {
      walk(CsrKeySource(a, h, k));
    }
    m.write(2 * row_bytes);
  }
  return m.t;
}

// ---- the tiled kernels ----------------------------------------------------------------------------

// One emulated launch: a CTA per (batch·head, block), in launch order, all counted into `tr`.
template <typename Body>
void emulate_launch(int64_t bhs, int64_t blocks, int lanes, int threads, bool count_only, MemoryTraffic& tr,
                    Body body) {
  for (int64_t bh = 0; bh < bhs; ++bh)
    for (int64_t block = 0; block < blocks; ++block) {
      EmulatedCta cta(lanes, threads, count_only, &tr);
      body(cta, bh, block);
    }
}

template <int kDim, typename T, typename S>
MemoryTraffic tiled_forward(const ForwardArgs<T, S>& a, bool count_only) {
  using Shape = TileShape<T, kDim>;
  MemoryTraffic tr;
  const int64_t rows = Shape::kGroups * Shape::kForwardQueries, bhs = a.batch * a.heads;
  emulate_launch(bhs, tiles_for(a.tokens, rows), Shape::kLanes, Shape::kThreads, count_only, tr,
                 [&](EmulatedCta& cta, int64_t bh, int64_t tile) { forward_tile<kDim>(cta, a, bh, tile); });
  // The merges run after every tile (a second launch on the stream).
  emulate_launch(bhs, kMaxTileGlobals, 1, kMergeThreads, count_only, tr,
                 [&](EmulatedCta& cta, int64_t bh, int64_t gi) { forward_merge(cta, a, bh, gi, rows); });
  return tr;
}

template <int kDim, typename T, typename S>
MemoryTraffic tiled_backward(const BackwardArgs<T, S>& a, bool count_only) {
  using Shape = TileShape<T, kDim>;
  MemoryTraffic tr;
  const int64_t rows = Shape::kGroups * Shape::kBackwardRows, bhs = a.batch * a.heads, tiles = tiles_for(a.tokens, rows);
  emulate_launch(bhs, tiles, Shape::kLanes, Shape::kThreads, count_only, tr,
                 [&](EmulatedCta& cta, int64_t bh, int64_t tile) { backward_query_tile<kDim>(cta, a, bh, tile); });
  emulate_launch(bhs, tiles, Shape::kLanes, Shape::kThreads, count_only, tr,
                 [&](EmulatedCta& cta, int64_t bh, int64_t tile) { backward_key_tile<kDim>(cta, a, bh, tile); });
  emulate_launch(bhs, kMaxTileGlobals, 1, kMergeThreads, count_only, tr,
                 [&](EmulatedCta& cta, int64_t bh, int64_t gi) { backward_merge(cta, a, bh, gi, rows); });
  return tr;
}

template <typename T, typename S>
MemoryTraffic tiled_forward_any(const ForwardArgs<T, S>& a, bool count_only) {
  if constexpr (sizeof(T) != 4) {
    return MemoryTraffic{};  // never: tiled_launch<double> is false
  } else {
    return a.dim == 64 ? tiled_forward<64>(a, count_only) : tiled_forward<128>(a, count_only);
  }
}
template <typename T, typename S>
MemoryTraffic tiled_backward_any(const BackwardArgs<T, S>& a, bool count_only) {
  if constexpr (sizeof(T) != 4) {
    return MemoryTraffic{};
  } else {
    return a.dim == 64 ? tiled_backward<64>(a, count_only) : tiled_backward<128>(a, count_only);
  }
}

// The tiled kernels where the device runs them (tiled_launch: D = 64 or 128; the emulation's plans
// have at most kMaxTileGlobals globals); other head sizes take the CSR rows, as on the device.
template <typename T, typename S, template <typename, typename> class A>
bool tiled(const A<T, S>& a, bool diagonal, KernelDesign design) {
  return design == KernelDesign::kTiles && tiled_launch<T>(diagonal, 0, a.dim);
}
template <typename A>
bool row_diagonal(const A& a, bool diagonal, KernelDesign design) {
  return diagonal && design == KernelDesign::kRows;
}

}  // namespace

template <typename T, typename S>
MemoryTraffic emulate_forward(const ForwardArgs<T, S>& a, bool diagonal, KernelDesign design) {
  if (tiled(a, diagonal, design)) return tiled_forward_any(a, false);
  diagonal = row_diagonal(a, diagonal, design);
  for_each_warp(a.rows(), [&](const EmulatedWarp& w, int64_t row) {
    if (diagonal) {
      forward_diagonal_warp(w, a, row);
    } else {
      forward_csr_warp(w, a, row);
    }
  });
  return row_forward_traffic(a, diagonal);
}

template <typename T, typename S>
MemoryTraffic emulate_backward(const BackwardArgs<T, S>& a, bool diagonal, KernelDesign design) {
  if (tiled(a, diagonal, design)) return tiled_backward_any(a, false);
  diagonal = row_diagonal(a, diagonal, design);
  // Two launches on one stream: every query row is done before any key row starts.
  for_each_warp(a.rows(), [&](const EmulatedWarp& w, int64_t row) {
    if (diagonal) {
      backward_query_diagonal_warp(w, a, row);
    } else {
      backward_query_csr_warp(w, a, row);
    }
  });
  for_each_warp(a.rows(), [&](const EmulatedWarp& w, int64_t row) {
    if (diagonal) {
      backward_key_diagonal_warp(w, a, row);
    } else {
      backward_key_csr_warp(w, a, row);
    }
  });
  return row_backward_traffic(a, diagonal);
}

template <typename T, typename S>
MemoryTraffic count_forward_traffic(const ForwardArgs<T, S>& a, bool diagonal, KernelDesign design) {
  return tiled(a, diagonal, design) ? tiled_forward_any(a, true)
                                    : row_forward_traffic(a, row_diagonal(a, diagonal, design));
}

template <typename T, typename S>
MemoryTraffic count_backward_traffic(const BackwardArgs<T, S>& a, bool diagonal, KernelDesign design) {
  return tiled(a, diagonal, design) ? tiled_backward_any(a, true)
                                    : row_backward_traffic(a, row_diagonal(a, diagonal, design));
}

#define SPARSEVIT_EMULATION_INSTANTIATE(T, S)                                                  \
  template MemoryTraffic emulate_forward(const ForwardArgs<T, S>&, bool, KernelDesign);         \
  template MemoryTraffic emulate_backward(const BackwardArgs<T, S>&, bool, KernelDesign);       \
  template MemoryTraffic count_forward_traffic(const ForwardArgs<T, S>&, bool, KernelDesign);   \
  template MemoryTraffic count_backward_traffic(const BackwardArgs<T, S>&, bool, KernelDesign);
SPARSEVIT_EMULATION_TYPES(SPARSEVIT_EMULATION_INSTANTIATE)

}  // namespace sparsevit::ops::cuda
