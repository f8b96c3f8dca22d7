"""sparsevit's operators as PyTorch 2 custom ops: torch.library.opcheck over the pattern zoo, meta
tensors, autocast; patched timm and torchvision ViTs under torch.compile(fullgraph=True) (one
compilation for the whole model, compiled equal to eager, forward and gradients) and
torch.export (ep.module() equal to eager, saved and loaded). Debian 12's torch 1.13 has none of
these APIs: the module skips there, with the reason."""
import io
import os
import warnings

import pytest
import torch

import sparsevit
from sparsevit import patterns

if not all(hasattr(torch, "compile") and hasattr(torch, "export") and hasattr(torch.library, n)
           for n in ("opcheck", "register_fake")):
    pytest.skip(f"torch {torch.__version__} has no torch.compile / torch.export / torch.library.opcheck "
                "(PyTorch >= 2.4; Debian 12's is 1.13)", allow_module_level=True)

from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

from peers import require_peer  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIGS = os.path.join(ROOT, "configs", "attention")
OPS = torch.ops.sparsevit


def config(name):
    return os.path.join(CONFIGS, name)


def zoo_pattern(name, tokens, heads):
    """(row_ptr, col_idx) int32 of a pattern of the zoo, or a hand-made one."""
    if name == "empty_rows":
        # Head 0: rows 1 and 3 have no key (zero output, zero gradient); head 1: only the class token.
        rows = [[[0, 2], [], [1, 2], [], [0]], [[0], [0], [0], [0], [0]]]
        width = max(sum(len(r) for r in h) for h in rows)
        row_ptr = torch.zeros(heads, tokens + 1, dtype=torch.int32)
        col_idx = torch.zeros(heads, width, dtype=torch.int32)
        for h, head in enumerate(rows):
            keys = [k for r in head for k in r]
            row_ptr[h, 1:] = torch.tensor([len(r) for r in head]).cumsum(0)
            col_idx[h, :len(keys)] = torch.tensor(keys, dtype=torch.int32)
        return row_ptr, col_idx
    file = {"fibottention": "vit_fibottention.yaml", "bigbird": "vit_bigbird.yaml",
            "local": "vit_structured_local.yaml"}[name]
    return patterns.build(config(file), tokens, heads, layer=1, layers=4, head_dim=16)


ZOO = [("fibottention", 17, 4), ("bigbird", 17, 4), ("local", 17, 4), ("empty_rows", 5, 2)]


def qkv_inputs(tokens, heads, dim, dtype, layout, requires_grad):
    """q, k, v [2, H, N, D]: contiguous, or ("strided") views of a [2, N, H, D] buffer, as timm's
    permute gives them."""
    g = torch.Generator().manual_seed(tokens * 7 + heads)
    out = []
    for _ in range(3):
        if layout == "strided":
            t = torch.randn(2, tokens, heads, dim, generator=g, dtype=torch.float64).to(dtype).transpose(1, 2)
        else:
            t = torch.randn(2, heads, tokens, dim, generator=g, dtype=torch.float64).to(dtype)
        out.append(t.requires_grad_(requires_grad))
    return out


CASES = [(name, dtype, layout) for name, _, _ in ZOO for dtype in (torch.float32, torch.float64)
         for layout in ("contiguous", "strided")] + [("fibottention", torch.bfloat16, "strided")]


@pytest.mark.parametrize("name,dtype,layout", CASES)
def test_opcheck_passes_for_the_public_operator(name, dtype, layout):
    tokens, heads = next((n, h) for z, n, h in ZOO if z == name)
    row_ptr, col_idx = zoo_pattern(name, tokens, heads)
    dim = 16
    q, k, v = qkv_inputs(tokens, heads, dim, dtype, layout, requires_grad=True)
    torch.library.opcheck(OPS.sparse_attention.default, (q, k, v, row_ptr, col_idx, dim ** -0.5))


@pytest.mark.parametrize("name,dtype", [(z, d) for z, _, _ in ZOO for d in (torch.float32, torch.bfloat16)])
def test_opcheck_passes_for_the_packed_qkv_operator(name, dtype):
    tokens, heads = next((n, h) for z, n, h in ZOO if z == name)
    row_ptr, col_idx = zoo_pattern(name, tokens, heads)
    dim = 16
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, tokens, 3 * heads * dim, generator=g).to(dtype).requires_grad_()
    torch.library.opcheck(OPS.sparse_attention_qkv.default, (qkv, heads, row_ptr, col_idx, dim ** -0.5))


@pytest.mark.parametrize("name", [z for z, _, _ in ZOO])
def test_opcheck_passes_for_the_private_forward_and_backward_operators(name):
    # They run below autograd (their derivative is the public op's backward), so they are checked
    # without requires_grad.
    tokens, heads = next((n, h) for z, n, h in ZOO if z == name)
    row_ptr, col_idx = zoo_pattern(name, tokens, heads)
    dim, scale = 16, 0.25
    q, k, v = qkv_inputs(tokens, heads, dim, torch.float32, "strided", requires_grad=False)
    out, lse = OPS._sparse_attention_forward(q, k, v, row_ptr, col_idx, scale)
    torch.library.opcheck(OPS._sparse_attention_forward.default, (q, k, v, row_ptr, col_idx, scale))
    torch.library.opcheck(OPS._sparse_attention_backward.default,
                          (torch.randn_like(out), q, k, v, out, lse, row_ptr, col_idx, scale))
    qkv = torch.randn(2, tokens, 3 * heads * dim)
    out, lse = OPS._sparse_attention_qkv_forward(qkv, heads, row_ptr, col_idx, scale)
    torch.library.opcheck(OPS._sparse_attention_qkv_forward.default, (qkv, heads, row_ptr, col_idx, scale))
    torch.library.opcheck(OPS._sparse_attention_qkv_backward.default,
                          (torch.randn_like(out), qkv, out, lse, heads, row_ptr, col_idx, scale))


def test_meta_tensors_give_the_shapes_and_dtypes_of_the_real_kernels():
    row_ptr, col_idx = zoo_pattern("fibottention", 17, 4)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        q, k, v = qkv_inputs(17, 4, 16, dtype, "strided", requires_grad=False)
        real_out, real_lse = OPS._sparse_attention_forward(q, k, v, row_ptr, col_idx, 0.25)
        meta = [t.to("meta") for t in (q, k, v, row_ptr, col_idx)]
        out, lse = OPS._sparse_attention_forward(*meta, 0.25)
        for m, r in ((out, real_out), (lse, real_lse)):
            assert m.device.type == "meta"
            assert (m.shape, m.dtype, m.stride()) == (r.shape, r.dtype, r.stride())
        assert OPS.sparse_attention(*meta, 0.25).shape == q.shape
    qkv = torch.empty(3, 17, 3 * 64, device="meta")
    out = OPS.sparse_attention_qkv(qkv, 4, row_ptr.to("meta"), col_idx.to("meta"), 0.25)
    assert out.shape == (3, 17, 64) and out.device.type == "meta"


def test_autocast_runs_the_operator_in_bfloat16_on_the_cpu_and_gradients_flow_back_in_float32():
    row_ptr, col_idx = zoo_pattern("fibottention", 17, 4)
    q, k, v = qkv_inputs(17, 4, 16, torch.float32, "strided", requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = OPS.sparse_attention(q, k, v, row_ptr, col_idx, 0.25)
    assert out.dtype == torch.bfloat16
    expected = OPS.sparse_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), row_ptr, col_idx, 0.25)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    out.float().sum().backward()
    assert q.grad.dtype == torch.float32 and q.grad.abs().sum() > 0
    # float64 is left alone, as autocast leaves matmul's float64.
    q64, k64, v64 = qkv_inputs(17, 4, 16, torch.float64, "strided", requires_grad=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert OPS.sparse_attention(q64, k64, v64, row_ptr, col_idx, 0.25).dtype == torch.float64


# ---- whole models ----------------------------------------------------------------------------

def timm_model(name, **kwargs):
    timm = require_peer("timm")
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=10, **kwargs)


def torchvision_vit():
    from torchvision.models import VisionTransformer
    torch.manual_seed(0)
    return VisionTransformer(image_size=32, patch_size=8, num_layers=3, num_heads=4, hidden_dim=64, mlp_dim=128,
                             num_classes=10)


# Small images keep the sequences short (N = 17) and the tests fast; the layers, widths and heads
# are the named models'.
MODELS = {
    "vit_tiny": lambda: timm_model("vit_tiny_patch16_224", img_size=64),
    "vit_small": lambda: timm_model("vit_small_patch16_224", img_size=64),
    "vit_base": lambda: timm_model("vit_base_patch16_224", img_size=64, depth=4),
    "deit_tiny": lambda: timm_model("deit_tiny_patch16_224", img_size=64),
    "torchvision_vit": torchvision_vit,
    # For the slow paths (inductor's code generation, dynamic shapes): ViT-T's blocks, two of them.
    "vit_tiny_2_blocks": lambda: timm_model("vit_tiny_patch16_224", img_size=64, depth=2),
}


def patched(model_name, cfg="vit_fibottention.yaml", dtype=torch.float32):
    model = MODELS[model_name]()
    sparsevit.patch_model(model, config(cfg))
    return model.to(dtype).eval()


def image_batch(model, batch, dtype=torch.float32, seed=1):
    size = 32 if not hasattr(model, "blocks") else model.patch_embed.img_size[0]
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed)).to(dtype)


def compile_counted(model, **kwargs):
    counter = CompileCounterWithBackend("aot_eager")
    return torch.compile(model, backend=counter, fullgraph=True, **kwargs), counter


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_patching_keeps_the_patterns_as_buffers_outside_the_state_dict():
    plain = MODELS["vit_tiny"]()
    model = patched("vit_tiny")
    assert list(model.state_dict()) == list(plain.state_dict())  # still timm's checkpoint layout
    attn = model.blocks[3].attn
    expected = patterns.build(config("vit_fibottention.yaml"), 17, 3, layer=3, layers=12, head_dim=64)
    assert torch.equal(attn.row_ptr, expected[0]) and torch.equal(attn.col_idx, expected[1])
    assert {n for n, _ in model.named_buffers() if n.startswith("blocks.3.")} == {"blocks.3.attn.row_ptr",
                                                                                 "blocks.3.attn.col_idx"}
    moved = model.to(torch.float64)
    assert moved.blocks[3].attn.row_ptr.dtype == torch.int32  # .to(dtype) leaves the indices alone


@pytest.mark.parametrize("model_name", [m for m in MODELS if m != "vit_tiny_2_blocks"])
def test_a_patched_model_compiles_whole_once_and_equals_eager_in_float64(model_name):
    model = patched(model_name, dtype=torch.float64)
    x = image_batch(model, 2, torch.float64)
    compiled, counter = compile_counted(model)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-12, atol=1e-12)
    compiled(image_batch(model, 2, torch.float64, seed=2))
    assert counter.frame_count == 1, f"{counter.frame_count} compilations of {model_name}"
    assert counter.op_count > 0


@pytest.mark.parametrize("cfg", ["vit_fibottention.yaml", "vit_bigbird.yaml", "vit_structured_local.yaml",
                                 "vit_fibottention_modified.yaml", "vit_dense.yaml"])
def test_compiled_gradients_equal_eager_in_float64(cfg):
    model = patched("vit_tiny", cfg, dtype=torch.float64).train()
    x = image_batch(model, 2, torch.float64)
    compiled, counter = compile_counted(model)
    grads = []
    for m in (model, compiled):
        model.zero_grad()
        m(x).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-10, atol=1e-12, msg=name)
    assert counter.frame_count == 1


def test_dynamic_batch_compiles_once_as_the_unpatched_model_does():
    # dynamic=True: one compilation for every batch size. Dynamo's first compile of a timm ViT
    # restarts its analysis once (it turns Python float attributes into tensors) and hands the
    # backend two graphs then, patched or not: so the patched model must compile exactly as often
    # as timm's own, and never again after its first call.
    counts = {}
    for name, cfg in (("timm", None), ("patched", "vit_fibottention.yaml")):
        torch._dynamo.reset()
        model = MODELS["vit_tiny_2_blocks"]().eval()
        if cfg:
            sparsevit.patch_model(model, config(cfg))
        compiled, counter = compile_counted(model, dynamic=True)
        after_first = None
        for batch in (2, 3, 5):
            x = image_batch(model, batch)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
            after_first = after_first or counter.frame_count
        assert counter.frame_count == after_first, f"{name}: recompiled for a new batch size"
        counts[name] = counter.frame_count
    assert counts["patched"] == counts["timm"], counts


def test_inductor_compiles_a_training_step_that_equals_eager():
    # The default backend (inductor, C++ code generation on the CPU), forward and backward.
    model = patched("vit_tiny_2_blocks").train()
    x = image_batch(model, 2)
    compiled = torch.compile(model, fullgraph=True)
    grads = []
    for m in (model, compiled):
        model.zero_grad()
        out = m(x)
        out.square().sum().backward()
        grads.append((out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=1e-4, atol=1e-4)
    for name in grads[0][1]:
        torch.testing.assert_close(grads[1][1][name], grads[0][1][name], rtol=1e-3, atol=1e-4, msg=name)


def test_a_sequence_length_first_seen_eagerly_is_kept_for_the_compiled_graph():
    # A SparseAttention built without the length (a user's own model) keeps the pattern of the
    # first length it sees; the compiled model then needs no call into the C++ core.
    attn = sparsevit.nn.SparseAttention(64, 4, attn_cfg=config("vit_fibottention.yaml"), layer=1, num_layers=4)
    x = torch.randn(2, 17, 64)
    eager = attn(x)
    assert attn._pattern_tokens == 17 and attn.row_ptr.shape == (4, 18)
    compiled, counter = compile_counted(attn)
    torch.testing.assert_close(compiled(x), eager)
    assert counter.frame_count == 1


def test_a_cpp_backend_warns_that_it_breaks_the_graph_and_still_runs_compiled():
    model = patched("vit_tiny", "vit_linformer.yaml")
    x = image_batch(model, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(model, backend="aot_eager")(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    assert any("torch.compile cannot trace" in str(w.message) for w in caught)
    torch._dynamo.reset()
    with pytest.raises(Exception):
        torch.compile(model, backend="aot_eager", fullgraph=True)(x)


@pytest.mark.parametrize("model_name", ["vit_tiny", "torchvision_vit"])
def test_export_round_trips_through_save_and_load(model_name, tmp_path):
    model = patched(model_name)
    x = image_batch(model, 2)
    ep = torch.export.export(model, (x,))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("sparsevit" in t for t in targets), targets  # the operator, not a dense decomposition
    torch.testing.assert_close(ep.module()(x), model(x), rtol=1e-5, atol=1e-5)
    path = tmp_path / "model.pt2"
    torch.export.save(ep, path)
    loaded = torch.export.load(path)
    x2 = image_batch(model, 2, seed=5)
    torch.testing.assert_close(loaded.module()(x2), model(x2), rtol=1e-5, atol=1e-5)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    torch.testing.assert_close(torch.export.load(buffer).module()(x2), model(x2), rtol=1e-5, atol=1e-5)
