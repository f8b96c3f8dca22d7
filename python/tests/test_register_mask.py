"""New masks from Python: registered in the C++ registry, named by configs, validated like every
pattern, used by patch_model."""
import pytest
import torch

import sparsevit

STRIPES = "attention: {backend: vit, mask: py_stripes, mask_kwargs: {period: 3}}"


def stripes(tokens, heads, layer, period=2):
    """Query q attends to keys with q's residue mod (period + head), and to the class token."""
    mask = torch.zeros(heads, tokens, tokens, dtype=torch.bool)
    for h in range(heads):
        idx = torch.arange(tokens)
        mask[h] = (idx[:, None] % (period + h)) == (idx[None, :] % (period + h))
        mask[h, :, 0] = True
    return mask


def test_a_registered_mask_builds_through_the_cpp_registry():
    sparsevit.patterns.register_mask("py_stripes", stripes)
    assert sparsevit.config.load(STRIPES)["mask"] == "py_stripes"
    layer = sparsevit.patterns.build_all(STRIPES, 17, 2, 1, head_dim=8)[0]
    assert torch.equal(layer.dense_mask(), stripes(17, 2, 0, period=3))
    assert 0 < layer.pruning_ratio < 1


def test_its_kwargs_are_validated_like_the_built_in_masks():
    sparsevit.patterns.register_mask("py_stripes", stripes)
    with pytest.raises(sparsevit.UsageError, match="did you mean 'period'"):
        sparsevit.config.load("attention: {backend: vit, mask: py_stripes, mask_kwargs: {perod: 3}}")
    with pytest.raises(sparsevit.UsageError, match="built in"):
        sparsevit.patterns.register_mask("fibo", stripes)


def test_bad_results_are_errors_naming_the_mask():
    sparsevit.patterns.register_mask("py_bad", lambda tokens, heads, layer: [[[tokens]] * tokens] * heads)
    with pytest.raises(sparsevit.UsageError, match="py_bad.*outside"):
        sparsevit.patterns.build_all("attention: {backend: vit, mask: py_bad}", 5, 2, 1)
    sparsevit.patterns.register_mask("py_bad", lambda tokens, heads, layer: [[[0]] * tokens])
    with pytest.raises(sparsevit.UsageError, match="1 heads, expected 2"):
        sparsevit.patterns.build_all("attention: {backend: vit, mask: py_bad}", 5, 2, 1)


def test_patch_model_uses_a_registered_mask():
    sparsevit.patterns.register_mask("py_stripes", stripes)
    torch.manual_seed(0)
    attn = sparsevit.nn.SparseAttention(16, 2, qkv_bias=True, attn_cfg=STRIPES, layer=0, num_layers=1).double()
    x = torch.randn(2, 17, 16, dtype=torch.float64)
    q, k, v = attn.qkv(x).reshape(2, 17, 3, 2, 8).permute(2, 0, 3, 1, 4)
    s = (q @ k.transpose(-2, -1)) * 8 ** -0.5
    ref = attn.proj((s.masked_fill(~stripes(17, 2, 0, 3), float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(2, 17, 16))
    assert torch.allclose(attn(x), ref, atol=1e-12)



def csr_to_dense(row_ptr, col_idx):
    heads, tokens = row_ptr.shape[0], row_ptr.shape[1] - 1
    mask = torch.zeros(heads, tokens, tokens, dtype=torch.bool)
    for h in range(heads):
        for q in range(tokens):
            mask[h, q, col_idx[h, row_ptr[h, q]:row_ptr[h, q + 1]].long()] = True
    return mask


def test_registering_a_mask_again_replaces_the_patterns_modules_cached():
    # SparseAttention's patterns come from the cache in sparsevit.patterns, which registering clears.
    sparsevit.patterns.register_mask("py_stripes", stripes)
    attn = sparsevit.nn.SparseAttention(16, 2, attn_cfg=STRIPES, layer=0, num_layers=1)
    assert torch.equal(csr_to_dense(*attn.pattern(17)), stripes(17, 2, 0, period=3))
    sparsevit.patterns.register_mask("py_stripes", lambda tokens, heads, layer, period=2: stripes(tokens, heads, layer, 1))
    assert torch.equal(csr_to_dense(*attn.pattern(17)), stripes(17, 2, 0, period=1))
    sparsevit.patterns.register_mask("py_stripes", stripes)
