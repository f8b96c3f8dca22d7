// General (CSR) kernels: the row-block forward and backward-query passes over W consecutive query
// rows, the per-row passes for long rows and runtime D, the key-centric backward pass over the
// transposed CSR, and their entry points (forward_rows, backward_query_rows, backward_key_rows).
// ISA-parametrised: include only through sparse_attention_cpu_impl.h, after cpu_fixed_row.h.
#pragma once

#if !defined(SPARSEVIT_CPU_ISA) || !defined(SPARSEVIT_CPU_IMPL_NAMESPACE_OPEN)
#error "include only through ops/cpu/sparse_attention_cpu_impl.h (inside its per-ISA namespace)"
#endif

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
