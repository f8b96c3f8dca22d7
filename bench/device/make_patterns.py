#!/usr/bin/env python3
"""Writes fibottention_patterns.json: the project's Fibottention pattern (layer 0 of 12, 12 heads,
configs/attention/vit_fibottention.yaml with w_max = N // 3, one prefix token) at every N the
device check uses, with the class token global and with `class_token: none`, as each head's
diagonal offsets (device_patterns.expand turns them into CSR on the device).

Source: the package's mask registry (sparsevit.patterns.build_all, needs _sparsevit_core in
$SPARSEVIT_BUILD) when it loads, whose CSR is decomposed into diagonals and checked to expand back
exactly; else (--source python) a transcription of src/patterns/fibottention_mask.cpp
(docs/masks.md, `fibo`: Wythoff rows, windows w_min + floor((i-1)(w_max-w_min)/(H-1)), the layer's
head permutation seeded_permutation(seed, layer, H) from mt19937_64). Either way
scripts/lib/tests/test_device_check.py compares the file with the library.

  PYTHONPATH=python SPARSEVIT_BUILD=build python3 bench/device/make_patterns.py
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CONFIG = "configs/attention/vit_fibottention.yaml"
SIZES = (197, 1025, 3137)
HEADS, LAYERS, LAYER, W_MIN, SEED = 12, 12, 0, 5, 0
MASK64 = (1 << 64) - 1


# ---- transcription of the C++ generator (paper compat, wythoff schedule) ----
def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class MT19937_64:
    """std::mt19937_64 (its output for a seed is fixed by the C++ standard)."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK64
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 62)) + i) & MASK64
        self.index = 312

    def __call__(self):
        if self.index >= 312:
            for i in range(312):
                x = (self.mt[i] & 0xFFFFFFFF80000000) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                self.mt[i] = self.mt[(i + 156) % 312] ^ xa
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def seeded_permutation(seed, layer, n):
    rng = MT19937_64(splitmix64(splitmix64(splitmix64(seed) ^ layer) ^ 0))
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        threshold = ((1 << 64) - bound) % bound
        while True:
            r = rng()
            if r >= threshold:
                break
        j = r % bound
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def floor_times_phi(n):
    return (n + math.isqrt(5 * n * n)) // 2


def wythoff_row(i):
    m = floor_times_phi(i)
    a = floor_times_phi(m)
    return a, a + m


def python_offsets(tokens, heads=HEADS, w_min=W_MIN, w_max=None, layer=LAYER, seed=SEED):
    """Per physical head, its sorted offsets (the C++ generator's order[h] -> logical head)."""
    w_max = tokens // 3 if w_max is None else w_max
    logical = []
    for i in range(1, heads + 1):
        w = w_min if heads == 1 else w_min + (i - 1) * (w_max - w_min) // (heads - 1)
        w = min(w, tokens - 1) if tokens - 1 >= 1 else w
        a, b = wythoff_row(i)
        terms = []
        while a <= w:
            terms.append(a)
            a, b = b, a + b
        logical.append(sorted({f for f in terms if 0 < f <= w}))
    order = seeded_permutation(seed, layer, heads)
    return [logical[order[h]] for h in range(heads)]


# ---- from the library ----
def library_offsets(tokens, class_token):
    """Per head (offsets, class_global) decomposed from sparsevit.patterns.build_all's CSR."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import sparsevit
    overrides = [f"w_max={tokens // 3}"] + ([] if class_token == "global" else ["class_token=none"])
    layer = sparsevit.patterns.build_all(os.path.join(ROOT, CONFIG), tokens, HEADS, LAYERS, 64, 1,
                                         overrides=overrides)[LAYER]
    rp, ci = layer.row_ptr.tolist(), layer.col_idx.tolist()
    heads = []
    for h in range(HEADS):
        offs = set()
        for j in range(tokens):
            for k in ci[h][rp[h][j]:rp[h][j + 1]]:
                if class_token == "global" and (j == 0 or k == 0):
                    continue
                offs.add(abs(j - k))
        heads.append(sorted(offs))
    return heads, (layer.row_ptr, layer.col_idx)


def make_entry(tokens, class_token, offsets):
    return {"N": tokens, "class_token": class_token, "class_global": class_token == "global",
            "overrides": [f"w_max={tokens // 3}"] + ([] if class_token == "global" else ["class_token=none"]),
            "heads": [{"offsets": o} for o in offsets]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", choices=("auto", "library", "python"), default="auto")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--out", default=os.path.join(HERE, "fibottention_patterns.json"))
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import device_patterns
    import torch

    source = args.source
    if source == "auto":
        try:
            library_offsets(29, "global")
            source = "library"
        except Exception as e:  # noqa: BLE001 - any failure: the transcription, said so
            print(f"make_patterns: the library is unavailable ({str(e).splitlines()[0][:200]}); "
                  "using the Python transcription", file=sys.stderr)
            source = "python"
    entries = []
    for n in (int(s) for s in args.sizes.split(",")):
        for ct in ("global", "none"):
            if source == "library":
                offsets, (rp, ci) = library_offsets(n, ct)
                e = make_entry(n, ct, offsets)
                got_rp, got_ci = device_patterns.expand(e)
                width = int(rp[:, -1].max())
                if not (torch.equal(got_rp, rp) and torch.equal(got_ci[:, :width], ci[:, :width])):
                    raise SystemExit(f"make_patterns: N={n} class_token={ct}: the library's pattern is not a union "
                                     "of diagonals plus a class token; the file cannot describe it")
            else:
                e = make_entry(n, ct, python_offsets(n))
            entries.append(e)
    data = {"config": CONFIG, "layer": LAYER, "layers": LAYERS, "heads": HEADS, "prefix_tokens": 1,
            "source": source, "entries": entries}
    with open(args.out, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"make_patterns: wrote {args.out} ({len(entries)} entries, source {source})")


if __name__ == "__main__":
    main()
