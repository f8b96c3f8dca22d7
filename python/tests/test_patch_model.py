"""SparseAttention and patch_model against attention written here in plain PyTorch, in float64:
a timm-layout ViT defined in this file and torchvision's VisionTransformer, dense and sparse."""
import os

import pytest
import torch
from torch import nn

import sparsevit

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIBO = os.path.join(ROOT, "configs", "attention", "vit_fibottention_small.yaml")
DENSE = os.path.join(ROOT, "configs", "attention", "vit_dense.yaml")


class Attention(nn.Module):
    """timm's Attention; `mask` [H, N, N] (True = attend) restricts it, as a reference."""

    def __init__(self, dim, num_heads, mask=None):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mask = mask

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        if self.mask is not None:
            s = s.masked_fill(~self.mask, float("-inf"))
        return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim, eps=1e-6), Attention(dim, heads)
        self.norm2, self.mlp = nn.LayerNorm(dim, eps=1e-6), Mlp(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, in_chans, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TinyVit(nn.Module):
    """A timm-layout ViT with timm's parameter names (default: 28x28x1 images, 4x4 patches, N = 50)."""

    def __init__(self, img=28, patch=4, in_chans=1, dim=32, depth=3, heads=4, classes=10):
        super().__init__()
        self.patch_embed = PatchEmbed(in_chans, dim, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


def masks(config, tokens, heads, depth, head_dim):
    return [p.dense_mask() for p in sparsevit.patterns.build_all(config, tokens, heads, depth, head_dim)]


def test_sparse_attention_module_equals_masked_attention_forward_and_gradients():
    torch.manual_seed(0)
    ref = Attention(32, 4).double()
    mod = sparsevit.nn.SparseAttention(32, 4, qkv_bias=True, attn_cfg=FIBO, layer=1, num_layers=3).double()
    mod.load_state_dict(ref.state_dict())
    ref.mask = masks(FIBO, 50, 4, 3, 8)[1]
    x = torch.randn(2, 50, 32, dtype=torch.float64, requires_grad=True)
    out, expected = mod(x), ref(x)
    assert torch.allclose(out, expected, atol=1e-12)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, [x, *mod.parameters()], g),
                    torch.autograd.grad(expected, [x, *ref.parameters()], g)):
        assert torch.allclose(a, b, atol=1e-10)
    assert torch.autograd.gradcheck(lambda t: mod(t), (x[:1, :, :].detach().requires_grad_(),))


def test_patch_model_keeps_weights_and_matches_the_masked_reference():
    torch.manual_seed(1)
    model = TinyVit().double().eval()
    x = torch.randn(3, 1, 28, 28, dtype=torch.float64)
    reference = TinyVit().double().eval()
    reference.load_state_dict(model.state_dict())
    for block, mask in zip(reference.blocks, masks(FIBO, 50, 4, 3, 8)):
        block.attn.mask = mask
    dense_out = model(x)
    report = sparsevit.patch_model(model, FIBO)
    assert report["layers_patched"] == 3 and report["layout"] == "timm" and report["tokens"] == 50
    assert 0.5 < report["pruning_ratio"] < 1
    assert isinstance(model.blocks[0].attn, sparsevit.nn.SparseAttention)
    out = model(x)
    assert torch.allclose(out, reference(x), atol=1e-10)
    assert not torch.allclose(out, dense_out, atol=1e-4)  # the pattern changes the model


def test_patch_model_with_a_dense_config_changes_nothing():
    torch.manual_seed(2)
    model = TinyVit().double().eval()
    x = torch.randn(2, 1, 28, 28, dtype=torch.float64)
    before = model(x)
    sparsevit.patch_model(model, DENSE)
    assert torch.allclose(model(x), before, atol=1e-12)


def test_torchvision_vision_transformer_dense_and_sparse():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(3)
    make = lambda: torchvision.models.VisionTransformer(image_size=28, patch_size=4, num_layers=2, num_heads=4,
                                                       hidden_dim=32, mlp_dim=64, num_classes=10).double().eval()
    model, dense, reference = make(), make(), make()
    dense.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 28, 28, dtype=torch.float64)
    before = model(x)
    sparsevit.patch_model(dense, DENSE)
    assert torch.allclose(dense(x), before, atol=1e-10)
    # The reference: torchvision's own MultiheadAttention with the pattern as an attention mask.
    reference.load_state_dict(model.state_dict())
    layer_masks = masks(FIBO, 50, 4, 2, 8)
    for layer, mask in zip(reference.encoder.layers, layer_masks):
        mha = layer.self_attention
        additive = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
        layer.self_attention = _MaskedMha(mha, additive)
    report = sparsevit.patch_model(model, FIBO)
    assert report["layout"] == "torchvision" and report["layers_patched"] == 2
    assert torch.allclose(model(x), reference(x), atol=1e-10)


class _MaskedMha(nn.Module):
    def __init__(self, mha, additive):
        super().__init__()
        self.mha, self.additive = mha, additive

    def forward(self, query, key, value, need_weights=False):
        mask = self.additive.repeat(query.shape[0], 1, 1)  # [B * H, N, N]
        return self.mha(query, key, value, attn_mask=mask, need_weights=False)


def test_unsupported_options_and_models_are_clear_errors():
    mod = sparsevit.nn.SparseAttention(32, 4, attn_drop=0.1, attn_cfg=FIBO).train()
    with pytest.raises(NotImplementedError, match="attention dropout with a sparse pattern"):
        mod(torch.randn(1, 50, 32))
    with pytest.raises(ValueError, match="no attention to replace in Linear"):
        sparsevit.patch_model(nn.Linear(3, 3), FIBO)
    with pytest.raises(TypeError, match="expected a torch.nn.Module .* got int"):
        sparsevit.patch_model(3, FIBO)


def test_patched_layers_go_to_the_device_and_dtype_of_the_layers_they_replace(monkeypatch):
    # No GPU in CI: the move is observed at its call. A model already on the GPU once kept its new
    # layers on the CPU (patch_model moved the dtype only; issue 47).
    moves = []
    real_to = nn.Module.to

    def spy(self, *args, **kwargs):
        if isinstance(self, (sparsevit.nn.SparseAttention, sparsevit.nn.SparseMultiheadAttention)):
            moves.append((type(self).__name__, kwargs.get("device"), kwargs.get("dtype")))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(nn.Module, "to", spy)
    model = TinyVit().double()
    sparsevit.patch_model(model, FIBO)
    assert moves and all(m == ("SparseAttention", torch.device("cpu"), torch.float64) for m in moves), moves
    tv = pytest.importorskip("torchvision")
    vit = tv.models.VisionTransformer(image_size=28, patch_size=7, num_layers=2, num_heads=2, hidden_dim=16,
                                      mlp_dim=32, num_classes=3)
    moves.clear()
    sparsevit.patch_model(vit, FIBO)
    assert moves and all(m == ("SparseMultiheadAttention", torch.device("cpu"), torch.float32) for m in moves), moves


def test_a_model_name_instead_of_a_model_says_how_and_suggests_the_near_name():
    timm = pytest.importorskip("timm")
    with pytest.raises(TypeError, match=r"patch_model\(timm.create_model\('vit_tiny_patch16_224'\), ...\)"):
        sparsevit.patch_model("vit_tiny_patch16_224", FIBO)
    with pytest.raises(TypeError, match="not a timm model name either; did you mean 'vit_tiny_patch16_224'"):
        sparsevit.patch_model("vit_tiny_patch16_244", FIBO)
    assert "vit_tiny_patch16_224" in timm.list_models()


def test_a_patched_model_traces_with_torch_jit():
    torch.manual_seed(4)
    model = TinyVit().eval()
    sparsevit.patch_model(model, FIBO)
    x = torch.randn(2, 1, 28, 28)
    traced = torch.jit.trace(model, x, check_trace=False)
    y = torch.randn(3, 1, 28, 28)
    assert torch.allclose(traced(y), model(y), atol=1e-5)


def test_a_patched_model_equals_the_cpp_model_on_the_same_weights(tmp_path):
    """tests/golden/predict/vit.pth (timm names, written by PyTorch) through this file's ViT,
    patched with the published Fibottention masks, against `sparsevit predict` on the same file."""
    import subprocess
    import numpy as np
    golden = os.path.join(ROOT, "tests", "golden", "predict")
    cfg = tmp_path / "fibo_reference.yaml"
    cfg.write_text("attention: {backend: vit, mask: fibo, mask_kwargs: {compat: reference}, kernel: sparse}\n")
    out = tmp_path / "logits.npy"
    build = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
    r = subprocess.run([os.path.join(build, "sparsevit"), "predict", "--weights", os.path.join(golden, "vit.pth"),
                        "--model", "vit_tiny_patch16_224", "--num_heads", "2", "--attn-cfg", str(cfg),
                        "--input", os.path.join(golden, "input.npy"), "--output", str(out), "--threads", "1"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    model = TinyVit(img=16, patch=4, in_chans=3, dim=16, depth=2, heads=2, classes=5).eval()
    model.load_state_dict(torch.load(os.path.join(golden, "vit.pth")))
    x = torch.from_numpy(np.load(os.path.join(golden, "input.npy")))
    with torch.no_grad():
        assert torch.allclose(model(x), torch.from_numpy(np.load(os.path.join(golden, "logits_dense.npy"))), atol=1e-4)
        sparsevit.patch_model(model, str(cfg))
        patched = model(x)
    assert torch.allclose(patched, torch.from_numpy(np.load(str(out))), atol=1e-5)
    assert torch.allclose(patched, torch.from_numpy(np.load(os.path.join(golden, "logits_fibo_reference.npy"))),
                          atol=1e-4)
