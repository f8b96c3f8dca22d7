"""sparsevit.models.load: a checkpoint trained by the CLI runs in PyTorch and gives the C++
model's logits (`sparsevit predict --resume`) on the same inputs, through `sparsevit export`."""
import os
import subprocess

import numpy as np
import pytest
import torch

import sparsevit
from safetensors_writer import write_safetensors
from test_patch_model import FIBO, ROOT

BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "sparsevit")


def cli(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny Fibottention ViT with mean pooling, trained for a few steps on Fashion-MNIST."""
    out = tmp_path_factory.mktemp("run")
    cli("finetune", "--model", "vit_nano_patch4_28", "--depth", 2, "--global_pool", "--dataset", "fashion_mnist",
        "--max_train_samples", 64, "--max_eval_samples", 32, "--epochs", 1, "--batch_size", 32, "--threads", 1,
        "--num_workers", 0, "--attn-cfg", FIBO, "--output_dir", out)
    return out


def predict(checkpoint, images, tmp_path):
    np.save(tmp_path / "x.npy", images.numpy())
    cli("predict", "--resume", checkpoint, "--input", tmp_path / "x.npy", "--output", tmp_path / "logits.npy",
        "--threads", 1)
    return torch.from_numpy(np.load(tmp_path / "logits.npy"))


def test_a_checkpoint_runs_in_python_with_the_cpp_logits(run, tmp_path):
    os.environ["SPARSEVIT_CLI"] = CLI
    model = sparsevit.models.load(str(run))
    assert model.sparsevit_model["model"] == "vit_nano_patch4_28" and model.global_pool == "avg"
    assert len(model.blocks) == 2 and not model.training
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(model(x), predict(run / "checkpoint.pt", x, tmp_path), atol=1e-4)


def test_an_exported_file_loads_without_the_cli(run, tmp_path):
    exported = tmp_path / "model.safetensors"
    cli("export", "--resume", run / "checkpoint.pt", "--format", "safetensors", "--output", exported)
    model = sparsevit.models.load(str(exported))
    reference = sparsevit.models.load(str(run))
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(model(x), reference(x))
    # The attention can be swapped for another config, keeping the weights.
    dense = sparsevit.models.load(str(exported), attn_cfg=os.path.join(ROOT, "configs", "attention", "vit_dense.yaml"))
    with torch.no_grad():
        assert not torch.allclose(dense(x), model(x), atol=1e-4)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        sparsevit.models.load(str(tmp_path / "missing.pt"))
    plain = tmp_path / "plain.safetensors"  # valid, but not written by `sparsevit export`
    write_safetensors(plain, {"w": torch.zeros(2)})
    with pytest.raises(ValueError, match="no sparsevit model description"):
        sparsevit.models.load(str(plain))
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(RuntimeError, match="broken.safetensors"):
        sparsevit.models.load(str(broken))
