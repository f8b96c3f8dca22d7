"""Shared by the device checks (scripts/device-check): a clear one-line exit without CUDA, loading
the operator library from the device build, the patterns (the project's Fibottention precomputed in
fibottention_patterns.json, see device_patterns.py; a Fibottention-like union of diagonals and
random CSR patterns for the kernels' other paths), the float64 masked reference, and result
records written as JSON lines."""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import device_patterns  # noqa: E402,F401  (re-exported for the scripts)

EXIT_NO_CUDA = 2


def die(script, message, code=1):
    """One line on stderr, then exit `code`."""
    print(f"{script}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def require_cuda(script):
    """Exits 2 with one line when this torch sees no GPU."""
    if not torch.cuda.is_available():
        die(script, f"CUDA is not available (torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
                    "this script needs a GPU", EXIT_NO_CUDA)


def ops_library_path():
    """$SPARSEVIT_OPS_LIB, else $SPARSEVIT_BUILD/libsparsevit_ops.so (default build-device/)."""
    if os.environ.get("SPARSEVIT_OPS_LIB"):
        return os.environ["SPARSEVIT_OPS_LIB"]
    build = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build-device"))
    return os.path.join(build, "libsparsevit_ops.so")


def load_ops(script="device_common"):
    """Loads libsparsevit_ops.so into torch.ops and returns torch.ops.sparsevit (one-line exit 1 if not)."""
    path = ops_library_path()
    if not os.path.isfile(path):
        die(script, f"{path} does not exist (build the target sparsevit_ops, or set SPARSEVIT_BUILD / SPARSEVIT_OPS_LIB)")
    try:
        torch.ops.load_library(path)
    except Exception as e:  # noqa: BLE001
        die(script, f"{path} does not load into torch {torch.__version__}: {str(e).splitlines()[0][:300]}")
    return torch.ops.sparsevit


def fibottention_like(tokens, heads, seed=0):
    """Per head: |j - k| in a Fibonacci-like offset set shifted per head (offset 0 on even heads),
    plus token 0 as a global row and column. CPU int32 (row_ptr [H, N+1], col_idx [H, nnz_max])."""
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
    """Random sorted keys per row (some rows empty): the CSR kernel's path."""
    g = torch.Generator().manual_seed(seed)
    rows_per_head = []
    for _ in range(heads):
        rows = []
        for _ in range(tokens):
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


def pattern(kind, tokens, heads):
    """(row_ptr, col_idx) on the CPU: 'fibottention' / 'fibottention_none' (the project's, precomputed;
    12 heads), 'fibottention_like', 'random'."""
    if kind in ("fibottention", "fibottention_none"):
        rp, ci = device_patterns.csr(tokens, "global" if kind == "fibottention" else "none")
        if rp.shape[0] != heads:
            raise ValueError(f"the precomputed pattern has {rp.shape[0]} heads, asked for {heads}")
        return rp, ci
    if kind == "fibottention_like":
        return fibottention_like(tokens, heads)
    if kind == "random":
        return random_pattern(tokens, heads, 8)
    raise ValueError(f"unknown pattern kind {kind!r}")


def dense_mask(row_ptr, col_idx, tokens, device):
    """[H, N, N] bool: True where a key is kept."""
    return device_patterns.dense_mask(row_ptr, col_idx, device)


def masked_reference(q, k, v, mask, scale):
    """float64 softmax over the kept keys, empty rows 0 (the operator's contract)."""
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v


def rel_err(got, want):
    """max |got - want| / max |want| over the tensor (inf when got has a NaN)."""
    want = want.double()
    diff = (got.double() - want).abs().max()
    if torch.isnan(diff):
        return float("inf")
    return float(diff / want.abs().max().clamp_min(1e-30))


class Records:
    """JSON lines at `path`, one per check or timing, flushed at once (a killed stage keeps what it
    wrote) and echoed to stdout."""

    def __init__(self, path, **common):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.f = open(path, "a")
        self.common = common

    def add(self, **record):
        line = json.dumps({**self.common, **record}, default=str)
        self.f.write(line + "\n")
        self.f.flush()
        print(line, flush=True)


def default_scale(dim):
    return 1.0 / math.sqrt(dim)
