"""The project's Fibottention patterns for the device check, without _sparsevit_core.

fibottention_patterns.json (committed beside this file, written by make_patterns.py) holds, per
sequence length N and class-token mode, each head's diagonal offsets (|j - k| = o) and whether token
0 is a global row and column: configs/attention/vit_fibottention.yaml with w_max = N // 3 (as
bench/peers_bench.py uses it), layer 0 of 12, 12 heads, one prefix token. `expand` turns an entry
into the operator's CSR (row_ptr [H, N+1], col_idx [H, width], int32, rows sorted, padding 0) with
plain torch, so the device needs neither the package's core nor the CLI.
scripts/lib/tests/test_device_check.py checks the expansion against sparsevit.patterns.build_all."""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PATTERN_FILE = os.path.join(HERE, "fibottention_patterns.json")


def load(path=PATTERN_FILE):
    with open(path) as f:
        return json.load(f)


def entry(tokens, class_token="global", data=None):
    """The file's entry for N = tokens and class_token global | none (KeyError naming what exists)."""
    data = data or load()
    for e in data["entries"]:
        if e["N"] == tokens and e["class_token"] == class_token:
            return e
    have = sorted((e["N"], e["class_token"]) for e in data["entries"])
    raise KeyError(f"no precomputed pattern for N={tokens} class_token={class_token} (have {have}); "
                   "run bench/device/make_patterns.py")


def expand_head(tokens, offsets, class_global):
    """One head's rows as (counts [N], keys [nnz]) int64, each row's keys sorted ascending."""
    n = tokens
    offs = sorted(int(o) for o in offsets if 0 < int(o) < n)
    j = torch.arange(n).unsqueeze(1)
    down = torch.tensor(sorted(offs, reverse=True), dtype=torch.long).view(1, -1)
    up = torch.tensor(offs, dtype=torch.long).view(1, -1)
    cand = torch.cat([j - down, j + up], dim=1) if offs else torch.empty(n, 0, dtype=torch.long)
    valid = (cand >= 0) & (cand < n)
    if class_global:
        valid &= cand != 0  # key 0 comes first, from the global column
        cand = torch.cat([torch.zeros(n, 1, dtype=torch.long), cand], dim=1)
        valid = torch.cat([torch.ones(n, 1, dtype=torch.bool), valid], dim=1)
    counts = valid.sum(1)
    keys = cand[valid]
    if class_global:  # row 0 attends to every token
        rest = keys[int(counts[0]):]
        keys = torch.cat([torch.arange(n), rest])
        counts = counts.clone()
        counts[0] = n
    return counts, keys


def expand(e):
    """An entry -> (row_ptr [H, N+1], col_idx [H, width]) int32 on the CPU, width = max nnz over heads."""
    n = e["N"]
    heads = [expand_head(n, h["offsets"], e["class_global"]) for h in e["heads"]]
    width = max(max(int(k.numel()) for _, k in heads), 1)
    row_ptr = torch.zeros(len(heads), n + 1, dtype=torch.int32)
    col_idx = torch.zeros(len(heads), width, dtype=torch.int32)
    for h, (counts, keys) in enumerate(heads):
        row_ptr[h, 1:] = torch.cumsum(counts, 0).to(torch.int32)
        col_idx[h, :keys.numel()] = keys.to(torch.int32)
    return row_ptr, col_idx


def csr(tokens, class_token="global"):
    """(row_ptr, col_idx) of the precomputed pattern at N = tokens."""
    return expand(entry(tokens, class_token))


def dense_mask(row_ptr, col_idx, device="cpu"):
    """[H, N, N] bool, True where a query attends to a key (built on `device`)."""
    heads, n = row_ptr.shape[0], row_ptr.shape[1] - 1
    rp, ci = row_ptr.to(device).long(), col_idx.to(device).long()
    mask = torch.zeros(heads, n, n, dtype=torch.bool, device=device)
    for h in range(heads):
        counts = rp[h, 1:] - rp[h, :-1]
        rows = torch.repeat_interleave(torch.arange(n, device=device), counts)
        mask[h, rows, ci[h, :int(rp[h, -1])]] = True
    return mask
