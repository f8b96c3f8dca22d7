"""Attention modules that run sparsevit's patterns: `SparseAttention` has timm's `Attention`
interface and parameter names (qkv, proj, num_heads, scale), so it drops into a timm-style ViT;
`SparseMultiheadAttention` stands in for torch.nn.MultiheadAttention inside torchvision's
VisionTransformer. The pattern of a layer is built by the C++ mask registry once per sequence
length, as the C++ models build it (layer index -> head shuffle), and run by the sparse operator."""
import torch
from torch import nn

from . import config as _config
from . import patterns as _patterns
from .ops import sparse_attention

_LAYER_CACHE = {}


def _layer_pattern(attn_cfg, overrides, tokens, heads, layers, head_dim, prefix_tokens, layer):
    """The (row_ptr, col_idx) of `layer` for a sequence of `tokens`, or None (dense); every
    layer's patterns are built in one call and cached per geometry."""
    yaml, source = _config.read(attn_cfg)
    key = (yaml, source, tuple(overrides), tokens, heads, layers, head_dim, prefix_tokens)
    if key not in _LAYER_CACHE:
        _LAYER_CACHE[key] = _patterns.build_all(attn_cfg, tokens, heads, layers, head_dim, prefix_tokens, overrides)
    p = _LAYER_CACHE[key][layer]
    return None if p is None else (p.row_ptr, p.col_idx)


def _check_supported(spec):
    if spec["backend"] not in ("vit", "dense") or spec["dynamic"]:
        raise NotImplementedError(
            f"sparsevit.nn: backend '{spec['backend']}'{' with a dynamic mask' if spec['dynamic'] else ''} is not "
            "available from Python yet; static patterns of backend vit are (configs with `mask:`)")


class SparseAttention(nn.Module):
    """timm's Attention (qkv -> per-head attention -> proj) with the attention restricted to the
    config's pattern for layer `layer` of `num_layers`."""

    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0.0, proj_drop=0.0, attn_cfg=None, layer=0,
                 num_layers=12, num_prefix_tokens=1, overrides=()):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not a multiple of num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.attn_cfg, self.overrides = attn_cfg, tuple(overrides)
        self.layer, self.num_layers, self.num_prefix_tokens = layer, num_layers, num_prefix_tokens
        _check_supported(_config.load(attn_cfg, overrides))

    def pattern(self, tokens):
        """(row_ptr, col_idx) for a sequence of `tokens`, or None when the layer is dense."""
        return _layer_pattern(self.attn_cfg, self.overrides, tokens, self.num_heads, self.num_layers, self.head_dim,
                              self.num_prefix_tokens, self.layer)

    def attend(self, q, k, v):
        """q, k, v [B, H, N, D] -> [B, H, N, D]."""
        pattern = self.pattern(q.shape[2])
        if pattern is None:
            attn = self.attn_drop(torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1))
            return attn @ v
        if self.training and self.attn_drop.p > 0:
            raise NotImplementedError("sparsevit.nn: attention dropout with a sparse pattern")
        return sparse_attention(q, k, v, pattern[0], pattern[1], self.scale)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        x = self.attend(q, k, v).transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(x))


class SparseMultiheadAttention(SparseAttention):
    """torch.nn.MultiheadAttention's call (self-attention, batch_first) for torchvision's
    EncoderBlock: forward(x, x, x, need_weights=False) -> (output, None)."""

    def forward(self, query, key=None, value=None, need_weights=False, **kwargs):
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise NotImplementedError("sparsevit.nn: only self-attention (query is key is value)")
        if need_weights:
            raise NotImplementedError("sparsevit.nn: need_weights=True")
        return super().forward(query), None
