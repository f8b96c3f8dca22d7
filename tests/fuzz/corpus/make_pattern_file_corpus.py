#!/usr/bin/python3
"""Seed corpora for the pattern-file fuzzers: small valid files for the geometry
tests/fuzz/pattern_file_fuzzer.cpp builds (N=10 tokens, H=2 heads, L=3 layers), written by NumPy.
  corpus/pattern_file/  .npz CSR ([L, H, ...] and [H, ...], int32/int64, stored/deflated), .npy dense
  corpus/npz/           the same archives (the archive reader alone)
  corpus/npy/           typed .npy seeds (int32, int64, bool, uint8)
Run: /usr/bin/python3 tests/fuzz/corpus/make_pattern_file_corpus.py"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
N, H, L = 10, 2, 3


def out(folder, name):
    os.makedirs(os.path.join(here, folder), exist_ok=True)
    return os.path.join(here, folder, name)


def window_mask(layers, window):
    """[layers, H, N, N] bool: |j - k| <= window + head, plus the class token's row and column."""
    m = np.zeros((layers, H, N, N), dtype=bool)
    j, k = np.indices((N, N))
    for h in range(H):
        m[:, h] = np.abs(j - k) <= window + h
        m[:, h, 0, :] = True
        m[:, h, :, 0] = True
    return m


def csr(mask, dtype):
    """row_ptr [..., N+1] and col_idx [..., W] (zero-padded) of a dense [..., N, N] mask."""
    lead = mask.shape[:-2]
    flat = mask.reshape(-1, N, N)
    width = int(flat.sum(axis=(1, 2)).max())
    row_ptr = np.zeros((len(flat), N + 1), dtype=dtype)
    col_idx = np.zeros((len(flat), width), dtype=dtype)
    for i, m in enumerate(flat):
        row_ptr[i, 1:] = np.cumsum(m.sum(axis=1))
        keys = np.nonzero(m)[1]
        col_idx[i, : len(keys)] = keys
    return row_ptr.reshape(*lead, N + 1), col_idx.reshape(*lead, width)


layers = window_mask(L, 1)
rp, ci = csr(layers, np.int32)
for folder in ("pattern_file", "npz"):
    np.savez(out(folder, "csr_layers_int32.npz"), row_ptr=rp, col_idx=ci)
    rp64, ci64 = csr(layers[0], np.int64)
    np.savez_compressed(out(folder, "csr_heads_int64_deflated.npz"), row_ptr=rp64, col_idx=ci64)
np.save(out("pattern_file", "dense_layers_bool.npy"), layers)
np.save(out("pattern_file", "dense_heads_uint8.npy"), window_mask(1, 2)[0].astype(np.uint8))
np.save(out("npy", "typed_int32.npy"), np.arange(6, dtype=np.int32).reshape(2, 3))
np.save(out("npy", "typed_int64.npy"), np.array([0, 5, 9], dtype=np.int64))
np.save(out("npy", "typed_bool.npy"), layers[0, 0])
np.save(out("npy", "typed_uint8.npy"), np.array([0, 1, 255], dtype=np.uint8))
