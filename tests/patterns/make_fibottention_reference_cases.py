#!/usr/bin/env python3
"""Regenerates tests/patterns/fibottention_reference_cases.inc.

Mirrors the published Fibottention reference implementation's mask semantics with plain
Python (no torch): floating-point phi for the Wythoff rows, every head's window equal to
the number of patch tokens P, get_fibonacci keeping its first term, the modified rows
(b' = b - a, a' = a - b'), the head order of `random.seed(layer); random.shuffle(heads)`,
and the class-token row/column always on. Each case pins the per-head offsets and a
FNV-1a hash of the H x (P+1) x (P+1) 0/1 masks in row-major order.
"""
import math
import random


def head_offsets(P, H, modified):
    phi = (1 + math.sqrt(5)) / 2
    heads = []
    for i in range(1, H + 1):
        a = int(math.floor(math.floor(i * phi) * phi))
        b = int(math.floor(math.floor(i * phi) * phi ** 2))
        if modified:
            b, a = b - a, a - (b - a)
        seq = [a, b]
        while seq[-1] <= P:
            seq.append(seq[-1] + seq[-2])
        heads.append(seq[:-1])
    return heads


def masks(P, H, modified, layer):
    heads = head_offsets(P, H, modified)
    random.seed(layer)
    random.shuffle(heads)
    N = P + 1
    out = []
    for offsets in heads:
        m = [[1 if (j == 0 or k == 0) else 0 for k in range(N)] for j in range(N)]
        for o in offsets:
            for j in range(1, N):
                for k in (j - o, j + o):
                    if 1 <= k < N:
                        m[j][k] = 1
        out.append(m)
    return heads, out


def fnv1a(ms):
    h = 0xCBF29CE484222325
    for m in ms:
        for row in m:
            for v in row:
                h ^= v
                h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


if __name__ == "__main__":
    for P, H, L in [(196, 12, 12), (49, 4, 3)]:
        for modified in (False, True):
            for layer in range(L):
                heads, ms = masks(P, H, modified, layer)
                offs = ", ".join("{" + ", ".join(str(o) for o in sorted(set(x)) if o < P) + "}" for x in heads)
                print(f"    {{{P + 1}, {H}, {layer}, {'true' if modified else 'false'}, {{{offs}}}, 0x{fnv1a(ms):016x}ULL}},")
