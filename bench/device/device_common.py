"""Shared by the device checks (scripts/device-check): loading the operator library from the
device build, the patterns (the project's Fibottention through the Python package when it loads,
else a Fibottention-like union of diagonals plus a global class token built here), the float64
masked reference, and result records written as JSON lines."""
import json
import math
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_ops():
    """Loads libsparsevit_ops.so from $SPARSEVIT_BUILD (the device build) into torch.ops."""
    build = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build-device"))
    torch.ops.load_library(os.path.join(build, "libsparsevit_ops.so"))
    return torch.ops.sparsevit


def fibottention_like(tokens, heads, seed=0):
    """Per head: |j - k| in a Fibonacci-like offset set shifted per head, plus token 0 (the class
    token) as a global row and column. CPU int32 (row_ptr [H, N+1], col_idx [H, nnz_max])."""
    rows_per_head = []
    for h in range(heads):
        a, b = 1 + h % 3, 2 + h
        offsets = {0} if h % 2 == 0 else set()
        while a < tokens and len(offsets) < 12:
            offsets.add(a)
            a, b = b, a + b
        rows = []
        for j in range(tokens):
            if j == 0:
                rows.append(list(range(tokens)))
                continue
            keys = {0} | {j + s * o for o in offsets for s in (1, -1) if 0 < j + s * o < tokens}
            rows.append(sorted(keys))
        rows_per_head.append(rows)
    return csr_from_rows(rows_per_head, tokens)


def random_pattern(tokens, heads, keys_per_row, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows_per_head = []
    for _ in range(heads):
        rows = []
        for j in range(tokens):
            n = int(torch.randint(0, keys_per_row * 2 + 1, (1,), generator=g))
            rows.append(sorted(torch.randperm(tokens, generator=g)[:n].tolist()))
        rows_per_head.append(rows)
    return csr_from_rows(rows_per_head, tokens)


def csr_from_rows(rows_per_head, tokens):
    heads = len(rows_per_head)
    nnz = max(sum(len(r) for r in rows) for rows in rows_per_head)
    row_ptr = torch.zeros(heads, tokens + 1, dtype=torch.int32)
    col_idx = torch.zeros(heads, max(nnz, 1), dtype=torch.int32)
    for h, rows in enumerate(rows_per_head):
        e = 0
        for j, keys in enumerate(rows):
            row_ptr[h, j] = e
            col_idx[h, e:e + len(keys)] = torch.tensor(keys, dtype=torch.int32)
            e += len(keys)
        row_ptr[h, tokens] = e
    return row_ptr, col_idx


def project_fibottention(tokens, heads, layers=12):
    """The project's own Fibottention pattern of layer 0 (configs/attention/vit_fibottention.yaml)
    when the Python package loads, else None."""
    try:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import sparsevit  # noqa: F401
        cfg = os.path.join(ROOT, "configs", "attention", "vit_fibottention.yaml")
        return sparsevit.patterns.build(cfg, tokens, heads, layer=0, layers=layers)
    except Exception as e:  # noqa: BLE001 - any failure: fall back, and say so
        print(f"device_common: the package's Fibottention is unavailable ({e}); using fibottention_like", flush=True)
        return None


def dense_mask(row_ptr, col_idx, tokens, device):
    """[H, N, N] bool: True where a key is kept."""
    heads = row_ptr.shape[0]
    mask = torch.zeros(heads, tokens, tokens, dtype=torch.bool)
    for h in range(heads):
        lengths = (row_ptr[h, 1:] - row_ptr[h, :-1]).long()
        rows = torch.repeat_interleave(torch.arange(tokens), lengths)
        cols = col_idx[h, :int(row_ptr[h, -1])].long()
        mask[h, rows, cols] = True
    return mask.to(device)


def masked_reference(q, k, v, mask, scale):
    """float64 softmax over the kept keys, empty rows 0 (the operator's contract)."""
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v


def rel_err(got, want):
    """max |got - want| / max |want| over the tensor."""
    want = want.double()
    return float((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30))


class Records:
    """JSON lines at `path`, one per check or timing, echoed to stdout."""

    def __init__(self, path):
        self.f = open(path, "a")

    def add(self, **record):
        line = json.dumps(record, default=str)
        self.f.write(line + "\n")
        self.f.flush()
        print(line, flush=True)


def default_scale(dim):
    return 1.0 / math.sqrt(dim)
