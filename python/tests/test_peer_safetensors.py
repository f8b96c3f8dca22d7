"""safetensors itself (python3-safetensors) against our reader and writer (src/weights/safetensors_file.*),
beside the hand-written writer of safetensors_writer.py: files written by safetensors.torch /
safetensors.numpy load through torch.ops.sparsevit.read_weight_file with the same names, dtypes,
shapes, values and metadata; files written by `sparsevit export --format safetensors` open with
safetensors.safe_open with the tensors `sparsevit export --format pth` gives torch.load."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

from peers import require_peer

safetensors_torch = require_peer("safetensors.torch")
safetensors_numpy = require_peer("safetensors.numpy")
from safetensors import safe_open  # noqa: E402  (after the peer check)

import sparsevit  # noqa: E402
from test_patch_model import DENSE, ROOT  # noqa: E402

BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "sparsevit")
METADATA = {"format": "pt", "note": "written by safetensors", "unicode": "Fibottention \u2192 \u03bb"}


def torch_tensors():
    """Every dtype our reader supports, scalars, empty tensors and a non-contiguous source."""
    g = torch.Generator().manual_seed(0)
    f = torch.randn(3, 5, generator=g)
    return {
        "f64": torch.randn(2, 3, dtype=torch.float64, generator=g),
        "f32": f,
        "f32.scalar": torch.tensor(3.25),
        "f32.transposed": f.t().contiguous(),
        "f16": torch.randn(4, 2, generator=g).half(),
        "bf16": torch.randn(7, generator=g).bfloat16(),
        "i64": torch.tensor([-(2 ** 62), -1, 0, 1, 2 ** 62]),
        "i32": torch.tensor([[-(2 ** 31), 2 ** 31 - 1]], dtype=torch.int32),
        "i16": torch.tensor([-32768, 32767], dtype=torch.int16),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "u8": torch.arange(0, 256, 17, dtype=torch.uint8).view(1, 1, -1),
        "bool": torch.tensor([[True, False, True], [False, False, True]]),
        "empty.f32": torch.zeros(0, 3),
        "empty.i64": torch.zeros(4, 0, dtype=torch.int64),
        "blocks.0.attn.qkv.weight": torch.randn(12, 4, generator=g),  # a timm-style name
    }


def assert_same_tensors(read, expected):
    assert sorted(read) == sorted(expected)
    for name, want in expected.items():
        got = read[name]
        assert got.dtype == want.dtype, name
        assert tuple(got.shape) == tuple(want.shape), name
        assert torch.equal(got, want), name


def test_a_file_written_by_safetensors_torch_reads_with_every_dtype_and_the_metadata(tmp_path):
    expected = torch_tensors()
    path = tmp_path / "peer.safetensors"
    safetensors_torch.save_file(expected, str(path), metadata=METADATA)
    read, metadata = sparsevit.models.read_weights(str(path))
    assert_same_tensors(read, expected)
    assert metadata == METADATA
    # Without metadata: an empty object, not an error.
    safetensors_torch.save_file({"w": expected["f32"]}, str(tmp_path / "plain.safetensors"))
    read, metadata = sparsevit.models.read_weights(str(tmp_path / "plain.safetensors"))
    assert metadata == {} and torch.equal(read["w"], expected["f32"])


def test_a_file_written_by_safetensors_numpy_reads(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {
        "f64": rng.standard_normal((3, 2)),
        "f32": rng.standard_normal((2, 2, 2)).astype(np.float32),
        "f16": rng.standard_normal(5).astype(np.float16),
        "i64": rng.integers(-10 ** 12, 10 ** 12, size=6),
        "i32": rng.integers(-100, 100, size=(2, 3)).astype(np.int32),
        "u8": rng.integers(0, 256, size=(2, 4, 3)).astype(np.uint8),
        "bool": rng.integers(0, 2, size=9).astype(bool),
        "empty": np.zeros((0,), dtype=np.float32),
    }
    path = tmp_path / "numpy.safetensors"
    safetensors_numpy.save_file(arrays, str(path), metadata={"written_by": "safetensors.numpy"})
    read, metadata = sparsevit.models.read_weights(str(path))
    assert_same_tensors(read, {k: torch.from_numpy(v) for k, v in arrays.items()})
    assert metadata == {"written_by": "safetensors.numpy"}


def test_a_file_safetensors_writes_loads_the_same_as_the_hand_written_writers(tmp_path):
    # The golden path of test_models.py writes with safetensors_writer.py; the peer's file of the
    # same tensors must read identically.
    from safetensors_writer import write_safetensors

    tensors = {"a": torch.randn(3, 4), "b": torch.randn(5)}
    write_safetensors(tmp_path / "ours.safetensors", tensors, {"k": "v"})
    safetensors_torch.save_file(tensors, str(tmp_path / "peer.safetensors"), metadata={"k": "v"})
    ours = sparsevit.models.read_weights(str(tmp_path / "ours.safetensors"))
    peer = sparsevit.models.read_weights(str(tmp_path / "peer.safetensors"))
    assert_same_tensors(peer[0], ours[0])
    assert peer[1] == ours[1]


def cli(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A one-step checkpoint of a small ViT (its weights are what `sparsevit export` writes)."""
    out = tmp_path_factory.mktemp("run")
    cli("finetune", "--model", "vit_nano_patch4_28", "--depth", 2, "--dataset", "fashion_mnist", "--max_train_samples",
        8, "--max_eval_samples", 8, "--epochs", 1, "--batch_size", 8, "--threads", 1, "--num_workers", 0,
        "--attn-cfg", DENSE, "--output_dir", out)
    return out / "checkpoint.pt"


def test_a_file_our_writer_exports_opens_in_safetensors_with_the_same_tensors_and_metadata(checkpoint, tmp_path):
    exported, pth = tmp_path / "model.safetensors", tmp_path / "model.pth"
    cli("export", "--resume", checkpoint, "--format", "safetensors", "--output", exported)
    cli("export", "--resume", checkpoint, "--format", "pth", "--output", pth)
    # PyTorch's own reader of our other format, as users call it: on torch 2.6 that is weights_only=True.
    expected = torch.load(pth, map_location="cpu")
    assert len(expected) > 10 and "blocks.1.attn.qkv.weight" in expected
    with safe_open(str(exported), framework="pt") as f:
        peer = {name: f.get_tensor(name) for name in f.keys()}
        metadata = f.metadata()
    assert_same_tensors(peer, expected)
    assert metadata["format"] == "pt"  # what timm and transformers check before loading
    description = json.loads(metadata["sparsevit_model"])
    assert "vit_nano_patch4_28" in json.dumps(description)
    # safetensors' own loader of the whole file agrees, and so does ours.
    assert_same_tensors(safetensors_torch.load_file(str(exported)), expected)
    ours, our_metadata = sparsevit.models.read_weights(str(exported))
    assert_same_tensors(ours, expected)
    assert our_metadata == metadata
    # The header is what the reference writer pads to: data starts 8-byte aligned.
    header_len = int.from_bytes(exported.read_bytes()[:8], "little")
    assert header_len % 8 == 0
