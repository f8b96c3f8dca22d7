#!/usr/bin/python3
"""Regenerates tests/golden/predict/: published-style weight files and the logits an independent
implementation computes from them, for `sparsevit predict` (tests/inference/predict_golden_test.cpp).

The tiny ViT of vit_reference.py (16x16x3 images, patch 4, dim 16, depth 2, 2 heads, 5 classes)
with its deterministic weights, saved the way users get weights:
  vit.pth              torch.save(OrderedDict state dict) -- what torch.save(model.state_dict()) writes
  vit_mae.pth          {"model": state dict, "epoch": 3}   -- MAE's checkpoint layout
  vit.safetensors      safetensors, written here from the format's definition (no package needed)
  vit_gap.safetensors  the global-pool variant (fc_norm instead of norm; MAE's finetuned models)
  input.npy            float32 images [4, 3, 16, 16], used as is
  logits_<case>.npy    float32 logits [4, 5] of the float64 reference for each case:
                       dense | fibo_reference (the published Fibottention masks, `compat: reference`) | gap

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_predict_golden.py
"""
import collections
import json
import os
import struct

import numpy as np
import torch

import vit_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "predict")
INPUT_SEED = 11


def write_safetensors(path, tensors, metadata=None):
    """The safetensors layout: u64 LE header length, JSON header, then the raw little-endian data."""
    header, chunks, offset = {}, [], 0
    dtypes = {torch.float32: "F32", torch.float16: "F16", torch.int64: "I64"}
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": dtypes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    os.makedirs(OUT, exist_ok=True)
    g = ref.GEOMETRY
    weights = ref.make_weights()
    gen = torch.Generator().manual_seed(INPUT_SEED)
    images = torch.randn(4, g["in_chans"], g["img_size"], g["img_size"], generator=gen, dtype=torch.float64)
    images = images.to(torch.float32).to(torch.float64)
    np.save(os.path.join(OUT, "input.npy"), images.to(torch.float32).numpy())

    state = collections.OrderedDict((k, v.to(torch.float32)) for k, v in weights.items())
    state._metadata = collections.OrderedDict([("", {"version": 1})])  # as nn.Module.state_dict() has
    torch.save(state, os.path.join(OUT, "vit.pth"))
    torch.save({"model": state, "epoch": 3}, os.path.join(OUT, "vit_mae.pth"))
    write_safetensors(os.path.join(OUT, "vit.safetensors"), state, {"format": "pt"})
    gap = collections.OrderedDict((k.replace("norm.", "fc_norm.") if k.startswith("norm.") else k, v)
                                  for k, v in state.items())
    write_safetensors(os.path.join(OUT, "vit_gap.safetensors"), gap)
    gap64 = {k: v.to(torch.float64) for k, v in gap.items()}

    N, H, L = ref.num_tokens(), g["num_heads"], g["depth"]
    cases = {
        "dense": ref.vit_forward(weights, images),
        "fibo_reference": ref.vit_forward(weights, images, [ref.fibottention_reference_mask(N, H, l) for l in range(L)]),
        "gap": ref.vit_forward(gap64, images, global_pool=True),
    }
    for name, logits in cases.items():
        np.save(os.path.join(OUT, f"logits_{name}.npy"), logits.to(torch.float32).numpy())
        print(name, logits[0].tolist())


if __name__ == "__main__":
    main()
