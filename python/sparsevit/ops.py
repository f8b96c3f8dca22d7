"""The operators of libsparsevit_ops.so (docs/operator_contract.md), with autograd."""
import torch

from ._library import load_library


def sparse_attention(q, k, v, row_ptr, col_idx, scale=None):
    """softmax(q k^T * scale) v restricted to the per-head CSR pattern (row_ptr [H, N+1],
    col_idx [H, nnz_max]); q, k, v [B, H, N, D]. scale defaults to 1/sqrt(D)."""
    load_library()
    if scale is None:
        scale = q.shape[-1] ** -0.5
    return torch.ops.sparsevit.sparse_attention(q, k, v, row_ptr, col_idx, float(scale))
