"""The examples in examples/python run (short settings) and print what they promise."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_example(name, *args):
    # The checkout's package over the in-tree build; on the PyPI leg, the package pip installed.
    env = dict(os.environ) if os.environ.get("SPARSEVIT_INSTALLED_VENV") else dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", name), *args], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_patch_torchvision_vit_b_16():
    pytest.importorskip("torchvision")
    out = run_example("patch_torchvision_vit.py", "--batch", "1", "--repeats", "1")
    assert "patched 12 layers (torchvision), N = 197: pruning ratio 0.98" in out
    assert "dense" in out and "sparse" in out


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"), reason="needs dataset-fashion-mnist")
def test_train_fashion_mnist_learns():
    out = run_example("train_fashion_mnist.py", "--steps", "60")
    accuracy = float(out.strip().splitlines()[-1].split(": ")[1].rstrip("%"))
    assert accuracy > 30  # chance is 10%
