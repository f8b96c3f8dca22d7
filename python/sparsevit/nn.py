"""Attention modules that run sparsevit's attention: `SparseAttention` has timm's `Attention`
interface and parameter names (qkv, proj, num_heads, scale), so it drops into a timm-style ViT;
`SparseMultiheadAttention` stands in for torch.nn.MultiheadAttention inside torchvision's
VisionTransformer.

Static patterns of backend `vit` (configs with `mask:`) are built by the C++ mask registry once per
sequence length, as the C++ models build them (layer index -> head shuffle), and run by the sparse
operator. Every other backend of the zoo (dense, top-k, Linformer, Efficient Attention, Performer,
iMHSA, Reformer) runs its C++ module (torch.classes.sparsevit.AttentionModule): the module's
parameters live here, as nn.Parameters, and are bound to the C++ module before each forward."""
import warnings

import torch
from torch import nn

from . import config as _config
from . import patterns as _patterns
from .ops import sparse_attention


def _uses_sparse_operator(spec):
    """Static patterns of backend vit (and dense vit) run here through the sparse operator."""
    return spec["backend"] == "vit" and not spec["dynamic"]


def _outside_compiled_graph(fn):
    """torch.compile runs `fn` eagerly (a graph break) instead of tracing into the C++ core; on a
    torch without torch.compiler (1.13) it is `fn` itself."""
    compiler = getattr(torch, "compiler", None)
    return compiler.disable(fn) if compiler is not None and hasattr(compiler, "disable") else fn


def _is_compiling():
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling()


_CPP_BACKEND_GRAPH_BREAK = (
    "sparsevit.nn: backend '{}' runs a C++ module (torch.classes.sparsevit.AttentionModule), which "
    "torch.compile cannot trace: each of its layers is a graph break (it runs eagerly between compiled "
    "graphs), and torch.compile(fullgraph=True) / torch.export refuse it. Static patterns of backend vit "
    "(Fibottention, BigBird, local, ...) compile whole (docs/python.md, 'torch.compile and export').")


class _CppAttentionFunction(torch.autograd.Function):
    """y = the C++ module's forward(x) with the given parameters; backward differentiates the
    graph the C++ forward recorded (no backend math in Python)."""

    @staticmethod
    def forward(ctx, cpp, training, x, *params):
        cpp.bind(list(params), training)
        with torch.enable_grad():
            x_in = x.detach().requires_grad_(x.requires_grad)
            out = cpp.forward(x_in)
        ctx.graph = (out, x_in, cpp.parameters())
        return out.detach()

    @staticmethod
    def backward(ctx, grad):
        out, x_in, cpp_params = ctx.graph
        inputs = ([x_in] if x_in.requires_grad else []) + cpp_params
        # Retained: the outer graph may be differentiated again (retain_graph, gradcheck); the
        # inner graph is freed with this node.
        grads = list(torch.autograd.grad(out, inputs, grad, allow_unused=True, retain_graph=True))
        grad_x = grads.pop(0) if x_in.requires_grad else None
        return (None, None, grad_x, *grads)


class SparseAttention(nn.Module):
    """timm's Attention (qkv -> per-head attention -> proj) with the attention restricted to the
    config's pattern for layer `layer` of `num_layers`."""

    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0.0, proj_drop=0.0, attn_cfg=None, layer=0,
                 num_layers=12, num_prefix_tokens=1, overrides=(), num_tokens=None):
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
        self.num_tokens = num_tokens  # the sequence length, for backends built for one (Linformer, iMHSA)
        spec = _config.load(attn_cfg, overrides)
        self.backend = spec["backend"]
        self._cpp_names = []  # the C++ module's parameter names, in its order (empty: sparse operator)
        # The pattern of one sequence length lives in non-persistent buffers (row_ptr, col_idx):
        # .to(device) moves them, state_dict() stays timm's, and torch.compile / torch.export see
        # plain tensors instead of a call into the C++ core. Built here when the length is known
        # (patch_model passes the model's), else at the first eager forward; other lengths are
        # built on first use outside the compiled graph (_pattern_of_length).
        self._pattern_tokens = None  # the length the buffers hold
        self._pattern_is_dense = False  # the config leaves this layer dense at that length
        self._other_lengths = {}
        if _uses_sparse_operator(spec) and num_tokens:
            self._keep_pattern(num_tokens)
        if not _uses_sparse_operator(spec):
            self._cpp = self._build_cpp(attn_drop, proj_drop)
            self._cpp_names = list(self._cpp.parameter_names())
            for name, value in zip(self._cpp_names, self._cpp.parameters()):
                if name.split(".")[0] in ("qkv", "proj"):
                    continue  # the nn.Linear layers above (timm's names), initialised as timm does
                if "." in name:
                    raise NotImplementedError(f"sparsevit.nn: nested backend parameter '{name}'")
                self.register_parameter(name, nn.Parameter(value.detach().clone()))

    def _build_cpp(self, attn_drop=None, proj_drop=None):
        yaml, source = _config.read(self.attn_cfg)
        geometry = [self.num_tokens or 0, self.num_prefix_tokens, self.num_heads, self.head_dim, self.num_layers]
        attn_drop = self.attn_drop.p if attn_drop is None else attn_drop
        proj_drop = self.proj_drop.p if proj_drop is None else proj_drop
        # The C++ module applies proj_drop itself; this module's proj_drop must not apply it twice.
        return torch.classes.sparsevit.AttentionModule(yaml, source, list(self.overrides), geometry, self.layer,
                                                       self.qkv.bias is not None, float(attn_drop), float(proj_drop))

    def __getstate__(self):
        # The C++ module is rebuilt on first use (deepcopy, pickling: timm's ModelEma copies modules).
        state = self.__dict__.copy()
        state.pop("_cpp", None)
        return state

    def set_progress(self, progress):
        """Training progress in [0, 1]: backends with a scheduled budget (top-k) follow it."""
        if self._cpp_names:
            self._cpp_module().set_progress(float(progress))

    def _cpp_module(self):
        if "_cpp" not in self.__dict__:
            self._cpp = self._build_cpp()
        return self._cpp

    def _keep_pattern(self, tokens):
        pattern = self.pattern(tokens)
        self._pattern_tokens, self._pattern_is_dense = tokens, pattern is None
        if pattern is not None:
            device = self.qkv.weight.device
            self.register_buffer("row_ptr", pattern[0].to(device), persistent=False)
            self.register_buffer("col_idx", pattern[1].to(device), persistent=False)

    @_outside_compiled_graph
    def _pattern_of_length(self, tokens, device):
        """(row_ptr, col_idx) on `device`, or None (dense), for a length the buffers do not hold."""
        if tokens not in self._other_lengths:
            pattern = self.pattern(tokens)
            self._other_lengths[tokens] = None if pattern is None else (pattern[0].to(device), pattern[1].to(device))
        pattern = self._other_lengths[tokens]
        if pattern is not None and pattern[0].device != device:
            pattern = self._other_lengths[tokens] = (pattern[0].to(device), pattern[1].to(device))
        return pattern

    def _pattern_for(self, tokens, device):
        if self._pattern_tokens is None and not _is_compiling():
            self._keep_pattern(tokens)  # the first length seen, eagerly: kept as buffers
        if tokens == self._pattern_tokens:
            return None if self._pattern_is_dense else (self.row_ptr, self.col_idx)
        return self._pattern_of_length(tokens, device)

    @_outside_compiled_graph
    def _warn_graph_break(self):
        if not getattr(self, "_warned_graph_break", False):
            self._warned_graph_break = True
            warnings.warn(_CPP_BACKEND_GRAPH_BREAK.format(self.backend), stacklevel=3)

    def _cpp_forward(self, x):
        if _is_compiling():
            self._warn_graph_break()
        return self._cpp_forward_eager(x)

    @_outside_compiled_graph
    def _cpp_forward_eager(self, x):
        if torch.jit.is_tracing():
            raise NotImplementedError(f"sparsevit.nn: torch.jit.trace of backend '{self.backend}' (a C++ module) is "
                                      "not supported; static patterns of backend vit trace")
        cpp = self._cpp_module()
        params = [self.get_parameter(n) for n in self._cpp_names]
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
            return _CppAttentionFunction.apply(cpp, self.training, x, *params)
        cpp.bind(params, self.training)
        return cpp.forward(x)

    def pattern(self, tokens):
        """(row_ptr, col_idx) for a sequence of `tokens`, or None when the layer is dense."""
        return _patterns.cached_layer(self.attn_cfg, tokens, self.num_heads, self.num_layers, self.head_dim,
                                      self.num_prefix_tokens, self.layer, self.overrides)

    def attend(self, q, k, v):
        """q, k, v [B, H, N, D] -> [B, H, N, D]."""
        pattern = self._pattern_for(q.shape[2], q.device)
        if pattern is None:
            attn = self.attn_drop(torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1))
            return attn @ v
        if self.training and self.attn_drop.p > 0:
            # As the C++ VitAttention: dropout of attention probabilities runs on dense attention only.
            raise NotImplementedError("sparsevit.nn: attention dropout with a sparse pattern (attn_drop > 0 is "
                                      "supported by dense attention only, as in the C++ models)")
        return sparse_attention(q, k, v, pattern[0], pattern[1], self.scale)

    def forward(self, x, attn_mask=None, is_causal=False):
        # timm >= 1.0 passes Block's attn_mask (None unless the caller gives one) to its Attention.
        if attn_mask is not None or is_causal:
            raise NotImplementedError("sparsevit.nn: an extra attn_mask / is_causal (the layer's own pattern is "
                                      "its mask; call the model without one)")
        if self._cpp_names:
            return self._cpp_forward(x)
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


def set_progress(model, progress):
    """Calls set_progress(progress) on every SparseAttention of `model` (top-k's k schedule);
    call it each iteration with step / total_steps, as the C++ trainer does."""
    for m in model.modules():
        if isinstance(m, SparseAttention):
            m.set_progress(progress)
