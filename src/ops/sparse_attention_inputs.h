// Validation of the sparse attention operator's inputs and the CSR index preparation shared by
// every backend: shape/dtype checks with messages that say what is wrong, the CSR values checked
// (bounds, monotone row_ptr, no duplicate key in a row), int32 copies for the kernels, and the
// per-head transposed CSR the backward's key-centric pass walks. A layer's pattern never changes,
// so the checked CSR and its transpose are prepared once per (row_ptr, col_idx) pair and reused
// (prepared_csr), not redone on every call.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "util/attention_geometry.h"

namespace sparsevit::ops {

struct AttentionShape {
  int64_t batch = 0;
  // num_heads, num_tokens and head_dim of q (the operator knows no prefix tokens or depth:
  // num_prefix_tokens 0, num_layers 1).
  AttentionGeometry layer;
  int64_t nnz_stride = 0;  // col_idx.size(1)

  static AttentionShape of(int64_t batch, int64_t heads, int64_t tokens, int64_t head_dim, int64_t nnz_stride) {
    AttentionShape s;
    s.batch = batch;
    s.layer = AttentionGeometry{tokens, 0, heads, head_dim, 1};
    s.nnz_stride = nnz_stride;
    return s;
  }
};

// q, k, v: [B, H, N, D], one floating dtype and device; row_ptr [H, N+1]; col_idx [H, nnz_max];
// int32 or int64. `op` names the operator in the messages.
AttentionShape check_attention_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& row_ptr, const at::Tensor& col_idx);

// qkv: [B, N, 3*H*D] as Linear(C, 3C) produces it (timm: viewed as [B, N, 3, H, D]), H =
// num_heads; its last dim must be a positive multiple of 3*num_heads. Same index checks.
AttentionShape check_qkv_inputs(const char* op, const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                const at::Tensor& col_idx);

// Contiguous int32 CPU copies (or the inputs themselves when already so) after checking every
// value: 0 <= row_ptr[h,0] <= ... <= row_ptr[h,N] <= nnz_max, 0 <= col < N, no key twice in a row.
struct CsrIndices {
  at::Tensor row_ptr;  // int32 [H, N+1]
  at::Tensor col_idx;  // int32 [H, nnz_stride]
  int64_t max_row_length = 0;
};
CsrIndices prepare_csr(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                       const AttentionShape& shape);

// Per head, the keys' lists of queries in increasing query order, and for each entry the edge's
// position in the row-major CSR: t_row_ptr [H, N+1], t_query and t_edge [H, nnz_stride].
struct TransposedCsr {
  at::Tensor row_ptr;
  at::Tensor query;
  at::Tensor edge;
};
TransposedCsr transpose_csr(const CsrIndices& csr, const AttentionShape& shape);

// Diagonal structure recovered from a CSR (Fibottention, local/dilated windows, Longformer, ...):
// per head h, Omega_h = {(j, k): |j - k| in offsets_h} U rows and columns of the global tokens G_h.
// Found by detect_diagonal_structure and verified to reproduce the CSR exactly; the structured
// kernels address keys j + delta directly instead of walking the CSR.
struct DiagonalPlanTensors {
  at::Tensor delta_ptr;   // int32 [H+1]: head h's signed deltas are deltas[delta_ptr[h] : delta_ptr[h+1]]
  at::Tensor deltas;      // int32: {-o, +o : o in offsets_h}, ascending (0 once if the main diagonal is in)
  at::Tensor global_ptr;  // int32 [H+1]
  at::Tensor globals;     // int32: head h's global tokens, ascending
  at::Tensor is_global;   // uint8 [H, N]
  at::Tensor global_pos;  // int32 [globals.size * N]: CSR position of key k in global row g (entry (g, k))
  int64_t max_slots = 0;  // max over heads of |deltas_h| + |G_h| (<= cpu::kMaxDiagonalSlots)
};

// The diagonal structure of the whole pattern, or nullopt when any head is not exactly such a
// union (then every head uses the general CSR kernels: one kernel per call keeps the scheduling
// and the workspaces simple). Global tokens of head h: tokens whose row lists all N keys and whose
// column is listed by all N rows. Offsets: |j - k| over the other entries. Verified by counting:
// every non-global row must list exactly |G_h| + #{k not global : |j - k| in offsets_h} keys
// (the CSR has no duplicates, so the listed set, a subset of the reconstruction, equals it).
// Also nullopt when a head needs more than cpu::kMaxDiagonalSlots deltas + globals.
std::optional<DiagonalPlanTensors> detect_diagonal_structure(const CsrIndices& csr, const AttentionShape& shape);

// The checked int32 CSR of a pattern, its transpose and its diagonal structure (if any).
struct PreparedCsr {
  CsrIndices csr;
  TransposedCsr transposed;
  std::optional<DiagonalPlanTensors> diagonal;
};

// prepare_csr + transpose_csr, done once per (row_ptr, col_idx) pair and then reused while
// neither tensor's values change: a cache found by the two tensors' addresses and confirmed by
// comparing their values with the values that were checked (one memcmp-speed pass, far cheaper
// than the checks and the transpose), so a write by any path (in place, through data() or a raw
// pointer) or an address reused by another tensor is prepared and checked again. The returned
// CSR never aliases the caller's tensors. Holds no reference to them. At most 64 entries, least
// recently used dropped.
std::shared_ptr<const PreparedCsr> prepared_csr(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                                                const AttentionShape& shape);

// For `sparsevit bench`: while the cache is off every call, forward and backward, prepares its
// indices again, as every call did before (what the cache saves); its entries are kept, not
// looked up. On by default.
void set_prepared_csr_cache_enabled(bool enabled);
struct PreparedCsrCacheStats {
  int64_t hits = 0, misses = 0;
};
PreparedCsrCacheStats prepared_csr_cache_stats();

}  // namespace sparsevit::ops
