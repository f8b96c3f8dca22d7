// Structured kernels for diagonal-offset patterns (DiagonalPlan: unions of diagonals plus global
// tokens): diagonal blocks for the forward and backward-query passes, the diagonal key pass, and
// their entry points; global rows and runtime D fall back to the CSR kernels.
// ISA-parametrised: include only through sparse_attention_cpu_impl.h, after cpu_csr_kernels.h.
#pragma once

#if !defined(SPARSEVIT_CPU_ISA) || !defined(SPARSEVIT_CPU_IMPL_NAMESPACE_OPEN)
#error "include only through ops/cpu/sparse_attention_cpu_impl.h (inside its per-ISA namespace)"
#endif

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
