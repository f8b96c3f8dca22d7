#!/usr/bin/python3
"""Regenerates tests/weights/fixtures/: weight files written by PyTorch itself (torch.save) and a
safetensors file written from the format's definition, with the values the C++ readers must find
(expected.json). Also the files the reader must refuse without running anything.

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/weights/make_weight_fixtures.py
"""
import argparse
import collections
import json
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


class Evil:
    """Unpickling this would call os.system: the reader must refuse the global, never call it."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/sparsevit_pwned",))


def tiny_state_dict():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    return model.state_dict()  # an OrderedDict with a _metadata attribute


def write_safetensors(path, tensors, metadata):
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    names = {torch.float32: "F32", torch.float16: "F16", torch.int64: "I64", torch.bool: "BOOL"}
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def values(t):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.detach().flatten().to(torch.float64).tolist()}


def main():
    os.makedirs(OUT, exist_ok=True)
    expected = {}
    sd = tiny_state_dict()
    torch.save(sd, os.path.join(OUT, "state_dict.pth"))
    expected["state_dict.pth"] = {k: values(v) for k, v in sd.items()}
    torch.save({"model": sd, "epoch": 3, "note": "mae", "scores": [1, 2.5, None, True]}, os.path.join(OUT, "mae_layout.pth"))
    expected["mae_layout.pth"] = expected["state_dict.pth"]

    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    mixed = collections.OrderedDict([
        ("slice", base[:, 1:3]),                      # a view into a shared storage, offset and strides
        ("transposed", base.t()),
        ("base", base),
        ("half", torch.tensor([0.5, -2.0, 65504.0], dtype=torch.float16)),
        ("bfloat", torch.tensor([1.5, -3.0], dtype=torch.bfloat16)),
        ("long", torch.tensor([-(2 ** 40), 7], dtype=torch.int64)),
        ("flags", torch.tensor([True, False, True])),
        ("param", torch.nn.Parameter(torch.tensor([[1.0, 2.0]]))),  # _rebuild_parameter
        ("scalar", torch.tensor(3.25)),
        ("empty", torch.zeros(0, 5)),
    ])
    torch.save(mixed, os.path.join(OUT, "mixed.pth"))
    expected["mixed.pth"] = {k: values(v) for k, v in mixed.items()}

    torch.save({"model": sd, "args": argparse.Namespace(lr=1.0)}, os.path.join(OUT, "namespace.pth"))
    torch.save({"model": sd, "payload": Evil()}, os.path.join(OUT, "evil.pth"))
    torch.save({"epoch": 3, "lr": 0.1}, os.path.join(OUT, "no_tensors.pth"))

    st = collections.OrderedDict([("w", torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4),
                                  ("h", torch.tensor([1.0, -0.25], dtype=torch.float16)),
                                  ("i", torch.tensor([[5, -6]], dtype=torch.int64)),
                                  ("b", torch.tensor([True, False]))])
    write_safetensors(os.path.join(OUT, "tensors.safetensors"), st, {"format": "pt", "source": "make_weight_fixtures.py"})
    expected["tensors.safetensors"] = {k: values(v) for k, v in st.items()}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
