"""timm itself (pinned by scripts/lib/python_peers.sh; random weights, no download) against
sparsevit, beside the hand-written timm-layout ViT of test_patch_model.py:
- sparsevit.patch_model on timm's own VisionTransformer: a dense config gives timm's logits (float32,
  |diff| <= 1e-4 x max |logit|: timm on torch 2.x attends through fused SDPA, we do not); a
  Fibottention config (and BigBird's asymmetric masks on vit_tiny) gives, in float64, the logits of
  masked dense attention (each timm Attention's forward replaced by softmax(QK^T * scale, masked by
  the per-head pattern of sparsevit.patterns) V), to 1e-9 relative;
- timm's state_dict saved with torch.save and with safetensors loads into `sparsevit predict
  --weights` (the C++ model) and gives timm's logits; with the Fibottention config, the float64
  reference's, to float32 tolerance."""
import copy
import functools
import os
import subprocess

import numpy as np
import pytest
import torch

from peers import require_peer

timm = require_peer("timm")

import sparsevit  # noqa: E402
from test_patch_model import DENSE, ROOT  # noqa: E402

BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "sparsevit")
FIBO = os.path.join(ROOT, "configs", "attention", "vit_fibottention.yaml")  # N = 197: windows 5..65
# Fibottention's masks are symmetric; BigBird's (global + window + random keys) are not, so a
# transposed mask fails too.
BIGBIRD = os.path.join(ROOT, "configs", "attention", "vit_bigbird.yaml")
MODELS = ["vit_tiny_patch16_224", "deit_small_patch16_224", "vit_base_patch16_224"]
# The CLI's name of each timm model's architecture (DeiT-S is ViT-S/16: same layers, another recipe).
CLI_MODEL = {"deit_small_patch16_224": "vit_small_patch16_224"}
TOKENS = 197  # 14 x 14 patches + the class token
FLOAT32_RTOL = 1e-4  # of the largest logit: float32 matmul-softmax-matmul vs timm's (SDPA on torch 2.x)
FLOAT64_RTOL = 1e-9  # same arithmetic in another order, float64


def max_relative_error(out, ref):
    return ((out - ref).abs().max() / ref.abs().max()).item()


@functools.lru_cache(maxsize=None)
def timm_case(name):
    """(timm model in eval mode, input [1, 3, 224, 224], timm's logits), once per module."""
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False).eval()
    assert isinstance(model, timm.models.vision_transformer.VisionTransformer)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)
    return model, x, logits


def layer_masks(model, config):
    """Per block: bool [H, N, N] (True = attend), or None for a dense layer, as patch_model builds them."""
    attn = model.blocks[0].attn
    patterns = sparsevit.patterns.build_all(config, TOKENS, attn.num_heads, len(model.blocks), attn.head_dim,
                                            model.num_prefix_tokens)
    return [None if p is None else p.dense_mask() for p in patterns]


def masked_attention_forward(attn, mask):
    """timm Attention's forward as plain masked dense attention (its own q/k norms, proj and
    output norm; no fused kernel)."""
    assert getattr(attn, "gate", None) is None

    def forward(x, attn_mask=None, is_causal=False):
        assert attn_mask is None and not is_causal
        b, n, _ = x.shape
        q, k, v = attn.qkv(x).reshape(b, n, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = attn.q_norm(q), attn.k_norm(k)
        s = (q @ k.transpose(-2, -1)) * attn.scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        out = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, attn.num_heads * attn.head_dim)
        return attn.proj_drop(attn.proj(attn.norm(out)))

    return forward


def reference_model(model, masks):
    """A float64 copy of timm's model whose attentions are masked_attention_forward."""
    ref = copy.deepcopy(model).double().eval()
    for block, mask in zip(ref.blocks, masks):
        block.attn.forward = masked_attention_forward(block.attn, mask)
    return ref


@functools.lru_cache(maxsize=None)
def sparse_reference(name, config):
    """Float64 logits of timm's model with every attention masked by the config's pattern."""
    model, x, _ = timm_case(name)
    masks = layer_masks(model, config)
    assert all(m is not None and m.shape == (model.blocks[0].attn.num_heads, TOKENS, TOKENS) for m in masks)
    with torch.no_grad():
        return reference_model(model, masks)(x.double())


def test_the_masked_reference_is_timms_attention_when_nothing_is_masked():
    # The reference's own check: unmasked, it is timm's forward (float64, same weights).
    model, x, _ = timm_case("vit_tiny_patch16_224")
    timm64 = copy.deepcopy(model).double()
    with torch.no_grad():
        expected = timm64(x.double())
        out = reference_model(model, [None] * len(model.blocks))(x.double())
    assert max_relative_error(out, expected) < FLOAT64_RTOL


@pytest.mark.parametrize("name", MODELS)
def test_patch_model_with_a_dense_config_gives_timms_logits(name):
    model, x, expected = timm_case(name)
    patched = copy.deepcopy(model)
    report = sparsevit.patch_model(patched, DENSE)
    assert report["layers_patched"] == len(model.blocks) and report["layout"] == "timm"
    assert report["tokens"] == TOKENS and report["pruning_ratio"] == 0
    assert all(isinstance(b.attn, sparsevit.nn.SparseAttention) for b in patched.blocks)
    with torch.no_grad():
        out = patched(x)
    assert max_relative_error(out, expected) <= FLOAT32_RTOL


@pytest.mark.parametrize("name, config", [(name, FIBO) for name in MODELS] + [(MODELS[0], BIGBIRD)],
                         ids=[f"{name}-fibottention" for name in MODELS] + [f"{MODELS[0]}-bigbird"])
def test_patch_model_with_a_sparse_config_gives_masked_dense_attention_in_float64(name, config):
    model, x, dense = timm_case(name)
    expected = sparse_reference(name, config)
    patched = copy.deepcopy(model).double()
    report = sparsevit.patch_model(patched, config)
    assert report["layers_patched"] == len(model.blocks) and report["pruning_ratio"] > 0.9
    with torch.no_grad():
        out = patched(x.double())
    assert out.dtype == torch.float64
    assert max_relative_error(out, expected) <= FLOAT64_RTOL
    # The pattern changes the model far beyond that tolerance (the test can tell a wrong pattern).
    assert max_relative_error(expected, dense.double()) > 1e3 * FLOAT64_RTOL
    if config == BIGBIRD:  # a transposed mask is another pattern here
        assert all(not torch.equal(m, m.transpose(1, 2)) for m in layer_masks(model, config))


def predict(weights, x, tmp_path, config, name):
    np.save(tmp_path / "x.npy", x.numpy())
    r = subprocess.run([CLI, "predict", "--weights", str(weights), "--model", CLI_MODEL.get(name, name), "--attn_cfg", config,
                        "--nb_classes", "1000", "--input", str(tmp_path / "x.npy"), "--output",
                        str(tmp_path / "logits.npy"), "--threads", "1", "--topk", "1"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return torch.from_numpy(np.load(tmp_path / "logits.npy"))


def save_state_dict(model, path, how):
    state = model.state_dict()
    if how == "torch.save":
        torch.save(state, path)
    else:
        safetensors_torch = require_peer("safetensors.torch")
        safetensors_torch.save_file({k: v.contiguous() for k, v in state.items()}, str(path), metadata={"format": "pt"})


@pytest.mark.parametrize("name", MODELS[:2])
@pytest.mark.parametrize("how", ["torch.save", "safetensors"])
def test_timms_state_dict_loads_into_sparsevit_predict_with_timms_logits(name, how, tmp_path):
    model, x, expected = timm_case(name)
    weights = tmp_path / ("timm.pth" if how == "torch.save" else "timm.safetensors")
    save_state_dict(model, weights, how)
    out = predict(weights, x, tmp_path, DENSE, name)
    assert out.shape == expected.shape
    assert max_relative_error(out, expected) <= FLOAT32_RTOL


def test_timms_weights_in_sparsevit_predict_with_fibottention_give_the_masked_reference(tmp_path):
    name = "vit_tiny_patch16_224"
    model, x, _ = timm_case(name)
    weights = tmp_path / "timm.pth"
    save_state_dict(model, weights, "torch.save")
    out = predict(weights, x, tmp_path, FIBO, name).double()
    assert max_relative_error(out, sparse_reference(name, FIBO)) <= FLOAT32_RTOL
