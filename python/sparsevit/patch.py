"""patch_model: replace the attention of a trained ViT with sparsevit's, keeping its weights."""
import difflib

from torch import nn

from . import config as _config
from . import patterns as _patterns
from .nn import SparseAttention, SparseMultiheadAttention


def _timm_blocks(model):
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return None
    if all(hasattr(b, "attn") and hasattr(b.attn, "qkv") and hasattr(b.attn, "proj") for b in blocks):
        return list(blocks)
    return None


def _torchvision_layers(model):
    encoder = getattr(model, "encoder", None)
    layers = getattr(encoder, "layers", None)
    if layers is None:
        return None
    layers = list(layers)
    if layers and all(isinstance(getattr(l, "self_attention", None), nn.MultiheadAttention) for l in layers):
        return layers
    return None


def _not_a_model_message(model):
    """patch_model was given something else than a module: for a name, how to make the model, with
    the nearest timm ViT names when the name is not one."""
    if not isinstance(model, str):
        return f"patch_model: expected a torch.nn.Module (a timm or torchvision ViT), got {type(model).__name__}"
    try:
        import timm
    except ImportError:
        return f"patch_model: expected a model, got the name '{model}'; create the model first (e.g. with timm)"
    if model in timm.list_models():
        return f"patch_model: expected a model, got the name '{model}': patch_model(timm.create_model('{model}'), ...)"
    near = difflib.get_close_matches(model, timm.list_models("vit_*") + timm.list_models("deit*"), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    return f"patch_model: expected a model, got '{model}', which is not a timm model name either{hint}"


def patch_model(model, attn_cfg=None, overrides=(), num_prefix_tokens=None):
    """Replaces every attention module of `model` in place and returns a report dict
    (layers_patched, layout, pruning_ratio, density, attention_gflops for the model's sequence
    length when known). Layouts: timm-style (`blocks[i].attn` with `qkv` / `proj`) and
    torchvision's VisionTransformer (`encoder.layers[i].self_attention`, nn.MultiheadAttention:
    in_proj_weight / in_proj_bias -> qkv, out_proj -> proj). Layer i gets the pattern the C++
    models give layer i (the head shuffle depends on it)."""
    if not isinstance(model, nn.Module):
        raise TypeError(_not_a_model_message(model))
    _config.load(attn_cfg, overrides)  # the CLI's errors before anything changes
    prefix = num_prefix_tokens if num_prefix_tokens is not None else getattr(model, "num_prefix_tokens", 1)
    tokens = _sequence_length(model, prefix)  # Linformer / iMHSA are built for one length
    blocks = _timm_blocks(model)
    if blocks is not None:
        layout = "timm"
        depth = len(blocks)
        for i, block in enumerate(blocks):
            old = block.attn
            dim = old.qkv.in_features
            new = SparseAttention(dim, old.num_heads, qkv_bias=old.qkv.bias is not None, attn_cfg=attn_cfg, layer=i,
                                  num_layers=depth, num_prefix_tokens=prefix, overrides=overrides, num_tokens=tokens)
            _load_projections(new, {k: v for k, v in old.state_dict().items() if k.split(".")[0] in ("qkv", "proj")})
            block.attn = new.to(device=old.qkv.weight.device, dtype=old.qkv.weight.dtype)
        heads, head_dim = blocks[0].attn.num_heads, blocks[0].attn.head_dim
    else:
        layers = _torchvision_layers(model)
        if layers is None:
            raise ValueError(f"patch_model: no attention to replace in {type(model).__name__}: expected timm-style "
                             "blocks[i].attn (qkv, proj: ViT, DeiT) or torchvision's "
                             "encoder.layers[i].self_attention (nn.MultiheadAttention)")
        layout = "torchvision"
        depth = len(layers)
        for i, layer in enumerate(layers):
            old = layer.self_attention
            if not old.batch_first or not old._qkv_same_embed_dim:
                raise ValueError("patch_model: nn.MultiheadAttention must be batch_first with one in_proj_weight")
            new = SparseMultiheadAttention(old.embed_dim, old.num_heads, qkv_bias=old.in_proj_bias is not None,
                                           attn_cfg=attn_cfg, layer=i, num_layers=depth, num_prefix_tokens=prefix,
                                           overrides=overrides, num_tokens=tokens)
            state = {"qkv.weight": old.in_proj_weight, "proj.weight": old.out_proj.weight}
            if old.in_proj_bias is not None:
                state["qkv.bias"] = old.in_proj_bias
            state["proj.bias"] = old.out_proj.bias
            _load_projections(new, {k: v.detach() for k, v in state.items()})
            layer.self_attention = new.to(device=old.in_proj_weight.device, dtype=old.in_proj_weight.dtype)
        heads, head_dim = layers[0].self_attention.num_heads, layers[0].self_attention.head_dim
    report = {"layers_patched": depth, "layout": layout, "backend": _config.load(attn_cfg, overrides)["backend"]}
    if tokens:
        stats = _patterns.stats(attn_cfg, tokens, heads, depth, head_dim, prefix, overrides)
        report.update(tokens=tokens, pruning_ratio=stats["pruning_ratio"], density=stats["density"],
                      attention_gflops=stats["attention_gflops"])
    return report


def _load_projections(new, state):
    """Loads qkv / proj into `new`; only a backend's own parameters (Linformer's E, F) may be
    missing: they keep their initialisation."""
    missing, unexpected = new.load_state_dict(state, strict=False)
    wrong = unexpected + [k for k in missing if k.split(".")[0] in ("qkv", "proj")]
    if wrong:
        raise ValueError(f"patch_model: attention weights do not fit: {', '.join(wrong)}")


def _sequence_length(model, prefix):
    pos = getattr(model, "pos_embed", None)
    if pos is None:
        pos = getattr(getattr(model, "encoder", None), "pos_embedding", None)
    return int(pos.shape[1]) if pos is not None and pos.dim() == 3 else None
