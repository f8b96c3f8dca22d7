"""A mask designed in Python, saved with sparsevit.patterns.save_file, read by the CLI's
`mask: file`: the CLI reports its budget and `sparsevit finetune` trains with it."""
import json
import os
import subprocess

import pytest
import torch

import sparsevit
from test_patch_model import FIBO, ROOT

BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))


def cli(*args, cwd):
    return subprocess.run([os.path.join(BUILD, "sparsevit"), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def stripes(tokens, heads, layer):
    """Head h attends to keys congruent to the query modulo heads + layer, plus itself."""
    period = heads + layer
    mask = torch.zeros(heads, tokens, tokens, dtype=torch.bool)
    for h in range(heads):
        for q in range(tokens):
            mask[h, q, [k for k in range(tokens) if (k - q - h) % period == 0 or k == q]] = True
    return mask


def config(folder, pattern_file):
    path = folder / "file_mask.yaml"
    path.write_text(f"attention:\n  backend: vit\n  mask: file\n  mask_kwargs:\n    pattern_file: {pattern_file}\n")
    return path


def test_the_cli_reads_a_python_mask_exactly(tmp_path):
    layers = [stripes(50, 4, layer) for layer in range(2)]
    sparsevit.patterns.save_file(tmp_path / "stripes.npz", layers)
    cfg = config(tmp_path, "stripes.npz")
    # Python builds the file back through the C++ registry: the same masks. A pip-installed core
    # has no libzip and refuses .npz in one line (docs/python.md); the CLI reads it below.
    os.chdir(tmp_path)  # pattern_file is relative to the working directory, as for the CLI
    try:
        masks = [p.dense_mask() for p in sparsevit.patterns.build_all(str(cfg), 50, 4, 2, 16)]
    except RuntimeError as e:
        assert os.environ.get("SPARSEVIT_INSTALLED_VENV") and "needs the CLI build" in str(e), e
        masks = layers
    finally:
        os.chdir(ROOT)
    for got, want in zip(masks, layers):
        assert torch.equal(got, want)
    r = cli("masks", "--tokens", 50, "--heads", 4, "--layers", 2, "--attn-cfg", cfg, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    patch_pairs = 49 * 49
    kept = [sum(int(m[h, 1:, 1:].sum()) for h in range(4)) / 4 for m in layers]
    assert report["pruning_ratio"] == pytest.approx(sum(1 - k / patch_pairs for k in kept) / 2, abs=1e-9)


def test_finetune_trains_with_a_python_mask(tmp_path):
    fibo = sparsevit.patterns.build_all(FIBO, 50, 4, 2, 16)  # a published mask, re-saved from Python
    sparsevit.patterns.save_file(tmp_path / "fibo.npz", fibo)
    cfg = config(tmp_path, "fibo.npz")
    r = cli("finetune", "--model", "vit_nano_patch4_28", "--depth", 2, "--dataset", "fashion_mnist",
            "--max_train_samples", 64, "--max_eval_samples", 32, "--epochs", 1, "--batch_size", 32, "--threads", 1,
            "--num_workers", 0, "--attn-cfg", cfg, "--output_dir", tmp_path / "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert metrics["train_loss"] == pytest.approx(metrics["train_loss"])  # finite
    expected = sparsevit.patterns.stats(FIBO, 50, 4, 2, 16)["attention_gflops"]
    assert metrics["attention_gflops"] == pytest.approx(expected, rel=1e-9)


def test_bad_layers_are_refused(tmp_path):
    with pytest.raises(ValueError, match="one pattern per layer"):
        sparsevit.patterns.save_file(tmp_path / "x.npz", [])
    with pytest.raises(ValueError, match="same heads and tokens"):
        sparsevit.patterns.save_file(tmp_path / "x.npz", [stripes(50, 4, 0), stripes(17, 4, 0)])
    sparsevit.patterns.save_file(tmp_path / "small.npz", [stripes(17, 4, 0)])
    r = cli("masks", "--tokens", 50, "--heads", 4, "--layers", 2, "--attn-cfg", config(tmp_path, "small.npz"),
            cwd=tmp_path)
    assert r.returncode != 0 and "small.npz" in r.stderr and len(r.stderr.strip().splitlines()) == 1
