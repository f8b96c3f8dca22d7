#!/usr/bin/env python3
"""How much of a TimeSformer's learned time_embed tells frame order: its parts symmetric and
antisymmetric under time reversal. A time_embed symmetric under reversal leaves the model blind to
order (a reversed clip gets the same embedding, and the rest of TimeSformer is indifferent to frame
order), so the antisymmetric part is what frame order can be read from.

usage: time_embed_symmetry.py WEIGHTS.pth   (`sparsevit export --format pth --resume CKPT --output WEIGHTS.pth`)
Needs torch."""
import json
import sys

import torch


def main(path):
    state = torch.load(path, map_location="cpu")
    te = state["time_embed"][0].double()  # [T, D]
    anti = (te - te.flip(0)) / 2
    sym = (te + te.flip(0)) / 2
    out = {"frames": te.shape[0], "norm": te.norm().item(), "antisymmetric_norm": anti.norm().item(),
           "symmetric_norm": sym.norm().item()}
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
