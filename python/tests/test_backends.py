"""The zoo's other backends from Python: SparseAttention runs their C++ modules (no Python copy
of their math). Checked against attention written here (Efficient Attention, top-k), against
finite differences (gradcheck through the bound parameters) and against the C++ model
(`sparsevit predict` on the same weights)."""
import copy
import os
import subprocess

import numpy as np
import pytest
import torch

import sparsevit
from test_patch_model import ROOT, TinyVit

CONFIGS = os.path.join(ROOT, "configs", "attention")
BACKENDS = ["vit_linformer", "vit_efficient", "vit_performer", "vit_imhsa", "vit_reformer", "vit_topk"]


def attention(cfg, **kwargs):
    options = dict(qkv_bias=True, attn_cfg=os.path.join(CONFIGS, cfg + ".yaml"), num_tokens=17, num_layers=2)
    options.update(kwargs)
    return sparsevit.nn.SparseAttention(16, 2, **options)


def heads(mod, x):
    b, n, c = x.shape
    return mod.qkv(x).reshape(b, n, 3, mod.num_heads, mod.head_dim).permute(2, 0, 3, 1, 4)


def project(mod, out):
    b, h, n, d = out.shape
    return mod.proj(out.transpose(1, 2).reshape(b, n, h * d))


def test_efficient_attention_equals_its_formula_in_float64():
    torch.manual_seed(0)
    mod = attention("vit_efficient").double()
    x = torch.randn(2, 17, 16, dtype=torch.float64)
    q, k, v = heads(mod, x)
    d = int(sparsevit.config.load(mod.attn_cfg)["backend_kwargs"]["key_dim"])  # queries / keys keep d features
    q, k = q[..., :d], k[..., :d]
    expected = project(mod, q.softmax(-1) @ (k.softmax(-2).transpose(-2, -1) @ v))  # Shen et al. 2021
    assert torch.allclose(mod(x), expected, atol=1e-12)


def test_topk_equals_masked_attention_over_the_k_best_keys():
    torch.manual_seed(1)
    mod = attention("vit_topk", overrides=("k=5",)).double().eval()
    x = torch.randn(2, 17, 16, dtype=torch.float64)
    q, k, v = heads(mod, x)
    s = (q @ k.transpose(-2, -1)) * mod.scale
    keep = torch.zeros_like(s, dtype=torch.bool).scatter_(-1, s.topk(5, -1).indices, True)
    expected = project(mod, s.masked_fill(~keep, float("-inf")).softmax(-1) @ v)
    assert torch.allclose(mod(x), expected, atol=1e-12)


@pytest.mark.parametrize("cfg", BACKENDS)
def test_gradients_through_the_cpp_module_match_finite_differences(cfg):
    torch.manual_seed(2)
    mod = attention(cfg).double()
    x = torch.randn(1, 17, 16, dtype=torch.float64, requires_grad=True)
    params = list(mod.parameters())
    # Every parameter (timm's qkv / proj and the backend's own, e.g. Linformer's E, F) gets a gradient.
    grads = torch.autograd.grad(mod(x).square().sum(), [x] + params)
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    if cfg not in ("vit_topk", "vit_reformer"):  # their key choice is piecewise constant: no smooth check
        mod.eval()  # Performer redraws its random features in training; fixed ones here
        assert torch.autograd.gradcheck(lambda t, w: mod(t), (x, params[0]), atol=1e-6)


@pytest.mark.parametrize("cfg", BACKENDS)
def test_modules_follow_dtype_deepcopy_and_the_optimizer(cfg):
    torch.manual_seed(3)
    mod = attention(cfg)
    x = torch.randn(2, 17, 16)
    clone = copy.deepcopy(mod)
    with torch.no_grad():
        assert torch.equal(clone(x), mod(x))
    assert mod.double()(x.double()).dtype == torch.float64
    mod.float()
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)
    before = mod(x).detach()
    mod(x).square().sum().backward()
    opt.step()
    assert not torch.allclose(mod(x), before)  # the C++ module sees the updated parameters


def test_a_backend_that_needs_the_sequence_length_says_so():
    with pytest.raises(Exception, match="sequence length"):
        attention("vit_linformer", num_tokens=None)


def test_patched_linformer_equals_the_cpp_model_on_the_same_weights(tmp_path):
    """A timm-layout ViT patched with Linformer (E, F trained in Python), saved with timm's names,
    against `sparsevit predict` on that file: the C++ model loads the backend's E and F too."""
    torch.manual_seed(4)
    model = TinyVit(img=16, patch=4, in_chans=3, dim=16, depth=2, heads=2, classes=5).eval()
    cfg = os.path.join(CONFIGS, "vit_linformer.yaml")
    report = sparsevit.patch_model(model, cfg)
    assert report["layers_patched"] == 2 and report["tokens"] == 17
    with torch.no_grad():
        for block in model.blocks:
            block.attn.E.normal_()
            block.attn.F.normal_()
    weights, images, out = tmp_path / "vit.pth", tmp_path / "x.npy", tmp_path / "logits.npy"
    torch.save(model.state_dict(), weights)
    x = torch.randn(3, 3, 16, 16)
    np.save(images, x.numpy())
    build = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
    r = subprocess.run([os.path.join(build, "sparsevit"), "predict", "--weights", str(weights), "--model",
                        "vit_tiny_patch16_224", "--num_heads", "2", "--attn-cfg", cfg, "--input", str(images),
                        "--output", str(out), "--threads", "1"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    with torch.no_grad():
        assert torch.allclose(model(x), torch.from_numpy(np.load(out)), atol=1e-5)


def test_tracing_a_cpp_backend_is_a_clear_error():
    mod = attention("vit_linformer").eval()
    with pytest.raises(NotImplementedError, match="torch.jit.trace of backend 'linformer'"):
        torch.jit.trace(mod, torch.randn(1, 17, 16), check_trace=False)
