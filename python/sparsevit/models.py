"""Run a sparsevit model in PyTorch: `load(path)` rebuilds a trained checkpoint (or weights that
`sparsevit export` wrote) as a timm-layout VisionTransformer whose attention is sparsevit's
(SparseAttention: the same per-layer patterns and backends as the C++ model), with timm's
parameter names. Image ViTs only; TimeSformer and MAE checkpoints are refused with a message."""
import json
import os
import shutil
import subprocess
import tempfile

import torch
from torch import nn

from . import _library
from .nn import SparseAttention


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """timm's pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, dim, num_heads, mlp_hidden, qkv_bias, attn_cfg, layer, depth, tokens, overrides):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = SparseAttention(dim, num_heads, qkv_bias=qkv_bias, attn_cfg=attn_cfg, layer=layer,
                                    num_layers=depth, num_tokens=tokens, overrides=overrides)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, mlp_hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, in_chans, dim, patch_size):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch_size, patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    """timm's VisionTransformer (class token, learned position embedding, pre-norm blocks,
    `global_pool` "token" -> norm then the class token, "avg" -> mean of the patch tokens then
    fc_norm), with SparseAttention in every block."""

    def __init__(self, img_size=224, patch_size=16, in_chans=3, num_classes=1000, embed_dim=768, depth=12,
                 num_heads=12, mlp_hidden=None, qkv_bias=True, global_pool="token", attn_cfg=None, overrides=()):
        super().__init__()
        if global_pool not in ("token", "avg"):
            raise ValueError(f"global_pool must be 'token' or 'avg', got '{global_pool}'")
        tokens = (img_size // patch_size) ** 2 + 1
        self.num_prefix_tokens, self.global_pool = 1, global_pool
        self.patch_embed = PatchEmbed(in_chans, embed_dim, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens, embed_dim))
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_hidden or 4 * embed_dim, qkv_bias, attn_cfg, i, depth, tokens, overrides)
            for i in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6) if global_pool == "token" else nn.Identity()
        self.fc_norm = nn.LayerNorm(embed_dim, eps=1e-6) if global_pool == "avg" else nn.Identity()
        self.head = nn.Linear(embed_dim, num_classes)

    def forward_features(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.norm(self.blocks(x))

    def forward(self, x):
        x = self.forward_features(x)
        x = x[:, 1:].mean(1) if self.global_pool == "avg" else x[:, 0]
        return self.head(self.fc_norm(x))


def read_weights(path):
    """(state dict, metadata dict) of a .safetensors / .pth file or a sparsevit checkpoint, read by
    the project's C++ readers (no pickle is executed)."""
    names, tensors, metadata = torch.ops.sparsevit.read_weight_file(os.path.abspath(path))
    return dict(zip(names, tensors)), json.loads(metadata)


def _cli():
    for candidate in (os.environ.get("SPARSEVIT_CLI"), os.path.join(os.path.dirname(_library.load_library()), "sparsevit"),
                      shutil.which("sparsevit")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("sparsevit.models.load: reading a training checkpoint needs the `sparsevit` CLI (its "
                       "`export` command); set SPARSEVIT_CLI or put it on PATH, or pass a file written by "
                       "`sparsevit export --format safetensors`")


def _exported(checkpoint, folder):
    """`sparsevit export` of a training checkpoint into `folder`: the model's timm-named weights with
    its description in the safetensors metadata."""
    out = os.path.join(folder, "model.safetensors")
    r = subprocess.run([_cli(), "export", "--resume", checkpoint, "--format", "safetensors", "--output", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip() or r.stdout.strip()).splitlines()[-1])
    return out


def _checkpoint_path(path):
    if os.path.isdir(path):  # a run folder
        path = os.path.join(path, "checkpoint.pt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"sparsevit.models.load: no such file '{path}'")
    return path


def load(path, attn_cfg=None, overrides=None):
    """The model in `path` — a training run's folder or checkpoint.pt (exported through the
    `sparsevit` CLI's `export`), or a .safetensors file written by `sparsevit export` — as a
    VisionTransformer in eval mode with its trained weights and its attention config (or
    `attn_cfg` / `overrides` in its place). `model.sparsevit_model` holds the description
    (model name, classes, dataset: inputs are normalised as that dataset's pipeline does)."""
    path = _checkpoint_path(path)
    with tempfile.TemporaryDirectory() as folder:
        if not path.endswith(".safetensors"):
            path = _exported(path, folder)
        state, metadata = read_weights(path)
    if "sparsevit_model" not in metadata:
        raise ValueError(f"sparsevit.models.load: {path} carries no sparsevit model description (write it with "
                         "`sparsevit export --format safetensors`)")
    # Read by the C++ reader of model descriptions (models/model_description), as the CLI reads it.
    description = _library.core().model_description(metadata["sparsevit_model"], path)
    if description["kind"] == "mae":
        raise ValueError(f"sparsevit.models.load: {path} is an MAE pretraining model; finetune it first")
    if description["kind"] != "classifier":
        raise ValueError(f"sparsevit.models.load: {path} does not describe a classifier")
    if description["num_frames"] or "time_embed" in state:
        raise ValueError(f"sparsevit.models.load: {path} is a video model (TimeSformer); only image ViTs load "
                         "in Python")
    if "patch_embed.backbone.0.conv.weight" in state:
        raise ValueError(f"sparsevit.models.load: {path} has the early-convolution stem (--stem conv); the Python "
                         "VisionTransformer has the patchify stem only (use the CLI, or timm's HybridEmbed + ConvStem: "
                         "docs/models.md)")
    depth = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks."))
    embed_dim, in_chans, patch, _ = state["patch_embed.proj.weight"].shape
    model = VisionTransformer(
        img_size=description.get("img_size", int(round((state["pos_embed"].shape[1] - 1) ** 0.5)) * patch),
        patch_size=patch, in_chans=in_chans, num_classes=state["head.weight"].shape[0], embed_dim=embed_dim,
        depth=depth, num_heads=description["num_heads"], mlp_hidden=state["blocks.0.mlp.fc1.weight"].shape[0],
        qkv_bias="blocks.0.attn.qkv.bias" in state, global_pool="avg" if "fc_norm.weight" in state else "token",
        attn_cfg=attn_cfg or description["attention_yaml"],
        overrides=description["attention_overrides"] if overrides is None else overrides)
    model.load_state_dict(state)
    model.sparsevit_model = description
    return model.eval()
