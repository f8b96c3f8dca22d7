"""Per-layer attention patterns built by the C++ mask registry, as the operator's CSR tensors,
and new masks registered from Python."""
import inspect
import json

import torch

from . import config as _config
from ._library import core


class LayerPattern:
    """One layer's pattern: row_ptr [H, N+1] and col_idx [H, width] (int32, padding 0), and its
    statistics (pruning_ratio over patch pairs, density over N x N, attention_gflops)."""

    def __init__(self, d, heads, tokens):
        self.row_ptr = torch.tensor(d["row_ptr"], dtype=torch.int32).view(heads, tokens + 1)
        self.col_idx = torch.tensor(d["col_idx"], dtype=torch.int32).view(heads, d["width"])
        self.edges = d["edges"]
        self.pruning_ratio = d["pruning_ratio"]
        self.density = d["density"]
        self.attention_gflops = d["attention_gflops"]
        self.warnings = list(d["warnings"])

    def dense_mask(self):
        """bool [H, N, N]: True where a query attends to a key."""
        heads, n = self.row_ptr.shape[0], self.row_ptr.shape[1] - 1
        mask = torch.zeros(heads, n, n, dtype=torch.bool)
        for h in range(heads):
            rp, ci = self.row_ptr[h].tolist(), self.col_idx[h].tolist()
            for q in range(n):
                mask[h, q, ci[rp[q]:rp[q + 1]]] = True
        return mask


def build_all(config, tokens, heads, layers, head_dim=64, prefix_tokens=1, overrides=()):
    """Every layer's pattern (None for dense layers and dynamic masks), as the C++ models build
    them for N = tokens (prefix tokens included), `heads` heads and `layers` layers."""
    yaml, source = _config.read(config)
    built = core().layer_patterns(yaml, source, list(overrides), tokens, prefix_tokens, heads, head_dim, layers)
    return [None if d is None else LayerPattern(d, heads, tokens) for d in built]


# Every layer's patterns per (config, overrides, geometry): modules of one model share a build.
_LAYER_CACHE = {}


def cached_layer(config, tokens, heads, layers, head_dim, prefix_tokens, layer, overrides=()):
    """(row_ptr, col_idx) of `layer`, or None (dense), as build() gives it; every layer of the
    geometry is built in one call and cached until a mask is registered again."""
    yaml, source = _config.read(config)
    key = (yaml, source, tuple(overrides), tokens, heads, layers, head_dim, prefix_tokens)
    if key not in _LAYER_CACHE:
        _LAYER_CACHE[key] = build_all(config, tokens, heads, layers, head_dim, prefix_tokens, overrides)
    p = _LAYER_CACHE[key][layer]
    return None if p is None else (p.row_ptr, p.col_idx)


def build(config, tokens, heads, layer=0, layers=None, head_dim=64, prefix_tokens=1, overrides=()):
    """(row_ptr, col_idx) of one layer (None for a dense layer). Layers differ by their head
    shuffle, so `layers` (default layer + 1) must be the model's depth for schedules that use it."""
    pattern = build_all(config, tokens, heads, layers or layer + 1, head_dim, prefix_tokens, overrides)[layer]
    return None if pattern is None else (pattern.row_ptr, pattern.col_idx)


def stats(config, tokens, heads, layers, head_dim=64, prefix_tokens=1, overrides=()):
    """`sparsevit flops`' report for any backend, as a dict: pruning_ratio (patch pairs skipped),
    density, attention_gflops (every computed pair) and attention_gflops_patch, and per layer
    (`layers`: pruning_ratio, density). Backends without a pattern (Linformer, Performer, ...)
    count equivalent pairs (their attention multiply-adds / (2 * head_dim)), as the CLI does."""
    yaml, source = _config.read(config)
    report = json.loads(core().report_json(yaml, source, list(overrides), tokens, prefix_tokens, heads, head_dim,
                                           layers))
    report["layers"] = [{"pruning_ratio": l["pruning_ratio"], "density": l["density"]}
                        for l in report.pop("layers_detail")]
    return report


def _value(text):
    """A kwarg as written in the YAML ("3", "0.5", "true", "[1, 2]" items) as a Python value."""
    if isinstance(text, list):
        return [_value(t) for t in text]
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def _rows(result, tokens, heads):
    """What a mask function returned -> per head, per query row, a list of keys. Accepted: a
    bool tensor [H, N, N], CSR tensors (row_ptr [H, N+1], col_idx [H, W]), or nested lists."""
    if isinstance(result, torch.Tensor):
        if result.dtype != torch.bool or tuple(result.shape) != (heads, tokens, tokens):
            raise ValueError(f"a mask tensor must be bool [{heads}, {tokens}, {tokens}], got "
                             f"{result.dtype} {list(result.shape)}")
        return [[row.nonzero().flatten().tolist() for row in head] for head in result]
    if isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result):
        row_ptr, col_idx = (t.tolist() for t in result)
        return [[col_idx[h][row_ptr[h][q]:row_ptr[h][q + 1]] for q in range(tokens)] for h in range(heads)]
    return [[list(row) for row in head] for head in result]


def register_mask(name, fn, summary="registered from Python"):
    """Registers mask `name` for this process: configs loaded afterwards (`mask: name`, with
    `mask_kwargs` for fn's keyword arguments), patch_model and SparseAttention build it through
    the C++ registry, which validates the result like every pattern. `fn(tokens, heads, layer,
    **kwargs)` returns the layer's pattern: a bool tensor [heads, tokens, tokens] (True: the query
    attends to the key), CSR tensors (row_ptr [heads, tokens + 1], col_idx [heads, width]), or
    per head, per query, a list of keys. Keyword arguments it accepts are the mask's kwargs
    (YAML values arrive as int, float, bool or str)."""
    params = inspect.signature(fn).parameters
    kwarg_names = [n for n, p in list(params.items())[3:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def build(tokens, heads, layer, prefix_tokens, kwargs):
        result = fn(tokens, heads, layer, **{k: _value(v) for k, v in kwargs.items()})
        return _rows(result, tokens, heads)

    core().register_mask(name, build, kwarg_names, summary)
    # Cached patterns of an earlier mask of the same name are stale now.
    _LAYER_CACHE.clear()


def save_file(path, layers):
    """Writes per-layer, per-head patterns as the `.npz` that `mask: file` reads
    (`mask_kwargs: {pattern_file: path}`), so `sparsevit finetune` trains a mask designed here.
    `layers`: a list with one entry per layer (or a single entry for every layer), each a
    LayerPattern, CSR tensors (row_ptr [H, N+1], col_idx [H, W]), a bool tensor [H, N, N], or
    per head, per query, a list of keys. The C++ reader validates the file like every pattern."""
    import numpy as np
    if not isinstance(layers, (list, tuple)) or not layers:
        raise ValueError("save_file: layers must be a non-empty list, one pattern per layer")
    rows = []
    for layer in layers:
        if isinstance(layer, LayerPattern):
            layer = (layer.row_ptr, layer.col_idx)
        if isinstance(layer, torch.Tensor):
            heads, tokens = layer.shape[0], layer.shape[1]
        elif isinstance(layer, tuple) and len(layer) == 2:
            heads, tokens = layer[0].shape[0], layer[0].shape[1] - 1
        else:
            heads, tokens = len(layer), len(layer[0])
        rows.append(_rows(layer, tokens, heads))
    shapes = {(len(r), len(r[0])) for r in rows}
    if len(shapes) != 1:
        raise ValueError(f"save_file: every layer needs the same heads and tokens, got {sorted(shapes)}")
    heads, tokens = shapes.pop()
    width = max(sum(len(q) for q in head) for layer in rows for head in layer)
    row_ptr = np.zeros((len(rows), heads, tokens + 1), dtype=np.int32)
    col_idx = np.zeros((len(rows), heads, width), dtype=np.int32)
    for l, layer in enumerate(rows):
        for h, head in enumerate(layer):
            keys = [k for q in head for k in sorted(q)]
            row_ptr[l, h, 1:] = np.cumsum([len(q) for q in head])
            col_idx[l, h, :len(keys)] = keys
    with open(path, "wb") as f:  # np.savez on a path would append ".npz" to other names
        np.savez(f, row_ptr=row_ptr, col_idx=col_idx)
