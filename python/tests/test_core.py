"""The Python package against the C++ library it wraps: configs and patterns from the C++
registry (the same errors as the CLI), the operator against dense masked attention in float64."""
import glob
import json
import os
import subprocess

import pytest
import torch

import sparsevit

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "configs", "attention", "**", "*.yaml"), recursive=True))


def cli(*args):
    return subprocess.run([os.path.join(BUILD, "sparsevit"), *args], capture_output=True, text=True, cwd=ROOT)


def test_the_library_is_loaded_into_torch_ops():
    assert os.path.exists(sparsevit.load_library())
    assert hasattr(torch.ops.sparsevit, "sparse_attention")


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.relpath(p, ROOT) for p in CONFIGS])
def test_every_shipped_config_loads(path):
    spec = sparsevit.config.load(path)
    assert spec["backend"]
    assert spec["source"] == path


def test_a_build_folder_of_another_torch_is_skipped_with_the_reason(tmp_path, monkeypatch):
    # A checkout's Debian build (LibTorch 1.13) seen from a venv of PyPI's torch: loading it
    # aborted the process ("std::system_error: Invalid argument"); it is skipped, and said so.
    from sparsevit import _library
    (tmp_path / "sparsevit_torch_version.txt").write_text("0.42.0\n")
    (tmp_path / "libsparsevit_ops.so").write_bytes(b"not a library")
    monkeypatch.setattr(_library, "_candidate_dirs", lambda: [str(tmp_path)])
    monkeypatch.delenv("SPARSEVIT_LIBRARY", raising=False)
    with pytest.raises(ImportError, match=r"built for LibTorch 0\.42\.0\), not PyTorch"):
        _library.find("libsparsevit_ops", ".so")
    (tmp_path / "sparsevit_torch_version.txt").write_text(torch.__version__.split("+")[0] + "\n")
    assert _library.find("libsparsevit_ops", ".so") == str(tmp_path / "libsparsevit_ops.so")


def test_a_misspelled_config_path_says_it_is_missing_and_suggests_the_near_name():
    missing = os.path.join(ROOT, "configs", "attention", "vit_fibotention.yaml")
    with pytest.raises(sparsevit.UsageError) as err:
        sparsevit.config.load(missing)
    message = str(err.value)
    assert f"attention config file '{missing}' does not exist; did you mean" in message, message
    assert repr(os.path.join(ROOT, "configs", "attention", "vit_fibottention.yaml")) in message, message
    assert "\n" not in message
    with pytest.raises(sparsevit.UsageError, match="does not exist \\(no folder 'no/such/folder'\\)"):
        sparsevit.config.load("no/such/folder/x.yaml")
    with pytest.raises(sparsevit.UsageError, match="neither an existing file nor YAML text"):
        sparsevit.config.load("fibottention")


def test_a_bad_config_raises_the_clis_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("attention:\n  backend: vit\n  mask: fibo\n  mask_kwargs: {w_mx: 3}\n")
    with pytest.raises(sparsevit.UsageError) as err:
        sparsevit.config.load(str(bad))
    assert isinstance(err.value, ValueError)
    assert "did you mean 'w_max'" in str(err.value)
    r = cli("masks", "--attn-cfg", str(bad))
    assert r.returncode == 2
    assert str(err.value) in r.stderr


def test_patterns_match_the_clis_report():
    path = os.path.join(ROOT, "configs", "attention", "vit_fibottention.yaml")
    stats = sparsevit.patterns.stats(path, 197, 12, 12)
    report = json.loads(cli("masks", "--attn-cfg", path, "--tokens", "197", "--heads", "12", "--layers", "12",
                            "--json").stdout)
    assert stats["pruning_ratio"] == pytest.approx(report["pruning_ratio"], abs=1e-12)
    assert stats["attention_gflops"] == pytest.approx(report["attention_gflops"], rel=1e-12)
    layers = sparsevit.patterns.build_all(path, 197, 12, 12)
    for layer, detail in zip(layers, report["layers_detail"]):
        edges = (layer.row_ptr[:, -1] - layer.row_ptr[:, 0]).tolist()
        assert edges == [h["edges"] for h in detail["heads"]]


def test_overrides_and_dense_layers():
    path = os.path.join(ROOT, "configs", "attention", "vit_fibottention.yaml")
    wide = sparsevit.patterns.stats(path, 50, 4, 2, overrides=["w_max=49"])
    narrow = sparsevit.patterns.stats(path, 50, 4, 2, overrides=["w_max=8"])
    assert wide["density"] > narrow["density"]
    assert sparsevit.patterns.build(os.path.join(ROOT, "configs", "attention", "vit_dense.yaml"), 50, 4) is None


def dense_masked_attention(q, k, v, mask, scale):
    scores = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


def test_sparse_attention_equals_dense_masked_attention_in_float64():
    torch.manual_seed(0)
    pattern = sparsevit.patterns.build_all(os.path.join(ROOT, "configs", "attention", "vit_bigbird.yaml"),
                                           17, 2, 1, head_dim=8, overrides=["pruning_ratio=0.6"])[0]
    q, k, v = (torch.randn(2, 2, 17, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = sparsevit.sparse_attention(q, k, v, pattern.row_ptr, pattern.col_idx)
    ref = dense_masked_attention(q, k, v, pattern.dense_mask(), 8 ** -0.5)
    assert torch.allclose(out, ref, atol=1e-12)
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), g)
    ref_grads = torch.autograd.grad(ref, (q, k, v), g)
    for a, b in zip(grads, ref_grads):
        assert torch.allclose(a, b, atol=1e-10)
    assert torch.autograd.gradcheck(
        lambda a, b, c: sparsevit.sparse_attention(a, b, c, pattern.row_ptr, pattern.col_idx), (q, k, v))
