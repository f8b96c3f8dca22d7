#!/usr/bin/python3
"""Fixtures for tests/weights, made by PyTorch itself (an implementation independent of ours).

Run with Debian's Python, which has torch 1.13 (the pyenv python3 has no torch):
    /usr/bin/python3 tests/weights/make_weight_fixtures.py            # rewrites tests/weights/fixtures/
    /usr/bin/python3 tests/weights/make_weight_fixtures.py --check-written OUR.pth OUR.safetensors EXPECTED.json
The second form is run by the C++ test PythonReads.OurPthAndSafetensorsFiles: torch.load, plain and
with weights_only=True, reads our write_pth output and the hand-written safetensors parser below reads our write_safetensors output,
and both must equal the expected values exactly (exit status 0), else it prints why and exits 1.
Each fixture NAME has NAME.expected.json: [[name, dtype, shape, flat values], ...] in order.
"""
import argparse
import collections
import io
import json
import os
import pickle
import struct
import sys
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
             "BOOL": torch.bool}
DTYPE_NAMES = {v: k for k, v in ST_DTYPES.items()}


def describe(tensors):
    out = []
    for name, t in tensors.items():
        values = t.detach().reshape(-1).tolist() if t.dtype != torch.bfloat16 else t.float().reshape(-1).tolist()
        out.append([name, DTYPE_NAMES[t.dtype], list(t.shape), values])
    return out


def write_expected(name, tensors):
    with open(os.path.join(OUT, name + ".expected.json"), "w") as f:
        json.dump(describe(tensors), f)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = torch.nn.Parameter(torch.randn(1, 1, 3))
        self.fc = torch.nn.Linear(4, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.register_buffer("steps", torch.tensor([7], dtype=torch.int64))


class PrintOnLoad:
    def __reduce__(self):
        return (print, ("sparsevit: this must never be printed",))


class SystemOnLoad:
    def __reduce__(self):
        return (os.system, ("touch /tmp/sparsevit_weights_pwned",))


# ---- hand-made archives: any pickle (protocol 2) plus chosen storage records ----
class FakeStorage:
    def __init__(self, storage_type, key, numel):
        self.pid = ("storage", storage_type, key, "cpu", numel)


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class ArchivePickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, FakeStorage) else None


def write_archive(path, obj, records, with_pickle=True):
    buf = io.BytesIO()
    ArchivePickler(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        if with_pickle:
            z.writestr("archive/data.pkl", buf.getvalue())
        for key, data in records.items():
            z.writestr("archive/data/" + key, data)
        z.writestr("archive/version", "3\n")


def write_safetensors_by_hand(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors_by_hand(path):
    """An independent parser: returns (OrderedDict name -> tensor, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = collections.OrderedDict()
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, end = e["data_offsets"]
        dtype = ST_DTYPES[e["dtype"]]
        blob = bytearray(data[b:end])
        if dtype == torch.bfloat16:
            t = torch.frombuffer(blob, dtype=torch.int16).view(torch.bfloat16) if blob else torch.empty(0, dtype=dtype)
        else:
            t = torch.frombuffer(blob, dtype=dtype) if blob else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"])
    return tensors, metadata


def make_fixtures():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = Tiny()
    sd = model.state_dict()
    assert hasattr(sd, "_metadata")
    torch.save(sd, os.path.join(OUT, "state_dict.pth"))
    write_expected("state_dict", sd)

    torch.save({"model": sd, "epoch": 3, "scaler": {"scale": 65536.0}}, os.path.join(OUT, "mae_checkpoint.pth"))
    write_expected("mae_checkpoint", sd)

    torch.save({"model": sd, "args": argparse.Namespace(lr=0.1)}, os.path.join(OUT, "namespace.pth"))
    torch.save({"model": sd, "x": PrintOnLoad()}, os.path.join(OUT, "reduce_print.pth"))
    torch.save({"x": SystemOnLoad()}, os.path.join(OUT, "reduce_system.pth"))
    torch.save({"w": torch.ones(2)}, os.path.join(OUT, "legacy.pth"), _use_new_zipfile_serialization=False)

    v = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    views = collections.OrderedDict([
        ("v", v), ("slice", v[:, 1:3]), ("t", v.t()), ("row", v[2]),
        ("half", torch.tensor([0.5, -1.25, 3.0], dtype=torch.float16)),
        ("bf16", torch.tensor([[1.5, -2.0]], dtype=torch.bfloat16)),
        ("long", torch.tensor([-(2 ** 40), 0, 2 ** 62], dtype=torch.int64)),
        ("flags", torch.tensor([True, False, True])),
        ("scalar", torch.tensor(2.5, dtype=torch.float64)),
        ("empty", torch.zeros(0, 3)),
    ])
    torch.save(views, os.path.join(OUT, "views.pth"))
    write_expected("views", views)

    param = collections.OrderedDict([("p", torch.nn.Parameter(torch.tensor([[1.0, 2.0, 3.0]]))),
                                     ("buf", torch.ones(2, dtype=torch.int32))])
    torch.save(dict(param), os.path.join(OUT, "parameter.pth"))
    write_expected("parameter", param)

    hand = collections.OrderedDict([
        ("blocks.0.weight", torch.tensor([[1.0, -2.5], [3.25, 1e-3]], dtype=torch.float32)),
        ("blocks.0.half", torch.tensor([0.5, 65504.0, -0.0], dtype=torch.float16)),
        ("step", torch.tensor([5, -6], dtype=torch.int64)),
    ])
    write_safetensors_by_hand(os.path.join(OUT, "hand.safetensors"), hand, {"format": "pt", "source": "hand"})
    write_expected("hand", hand)

    # Damaged archives (hand-made zips around hand-made pickles).
    four = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    ok = FakeStorage(torch.FloatStorage, "0", 4)
    write_archive(os.path.join(OUT, "crafted_ok.pth"), {"w": FakeTensor(ok, 1, (3,), (1,))}, {"0": four})
    with open(os.path.join(OUT, "crafted_ok.expected.json"), "w") as f:
        json.dump([["w", "F32", [3], [2.0, 3.0, 4.0]]], f)
    write_archive(os.path.join(OUT, "bad_view_beyond_storage.pth"), {"w": FakeTensor(ok, 2, (3,), (1,))}, {"0": four})
    write_archive(os.path.join(OUT, "bad_storage_size.pth"),
                  {"w": FakeTensor(FakeStorage(torch.FloatStorage, "0", 5), 0, (4,), (1,))}, {"0": four})
    write_archive(os.path.join(OUT, "bad_missing_record.pth"), {"w": FakeTensor(ok, 0, (4,), (1,))}, {})
    write_archive(os.path.join(OUT, "bad_no_data_pkl.pth"), {}, {"0": four}, with_pickle=False)
    write_archive(os.path.join(OUT, "bad_not_tensor_in_model.pth"),
                  {"model": {"w": FakeTensor(ok, 0, (4,), (1,)), "note": "hello"}}, {"0": four})


def check_written(pth, safetensors, expected_json):
    with open(expected_json) as f:
        expected = json.load(f)
    # Plain torch.load (weights_only=True by default from torch 2.6 on) and weights_only=True on
    # every version (what timm's load_checkpoint passes): only allow-listed globals in the pickle.
    loaded = torch.load(pth)
    weights_only = torch.load(pth, weights_only=True)
    st, _ = read_safetensors_by_hand(safetensors)
    for label, got in (("torch.load " + pth, loaded), ("torch.load(weights_only=True) " + pth, weights_only),
                       ("safetensors " + safetensors, st)):
        if list(got.keys()) != [e[0] for e in expected]:
            print(f"{label}: names {list(got.keys())} differ from {[e[0] for e in expected]}")
            return 1
        for name, dtype, shape, values in expected:
            t = got[name]
            flat = (t.float() if t.dtype == torch.bfloat16 else t).reshape(-1).tolist()
            if DTYPE_NAMES[t.dtype] != dtype or list(t.shape) != shape or flat != values:
                print(f"{label}: '{name}' is {t.dtype} {list(t.shape)} {flat}, expected {dtype} {shape} {values}")
                return 1
    print("python reads both files: OK")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--check-written":
        sys.exit(check_written(*sys.argv[2:]))
    make_fixtures()
