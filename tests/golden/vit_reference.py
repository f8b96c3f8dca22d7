"""An independent float64 reference of the Vision Transformer as timm builds it, for the
golden tests (tests/models/vit_golden_test.cpp, tests/train/training_trajectory_golden_test.cpp).

Written from the paper (Dosovitskiy et al. 2021) and timm's VisionTransformer semantics, with
explicit formulas instead of torch.nn modules, so a change in sparsevit's C++ model cannot
change the reference:

  tokens = [cls_token ; PatchEmbed(x)] + pos_embed       (PatchEmbed: conv k = stride = patch)
  block:  x = x + attn(norm1(x));  x = x + mlp(norm2(x))  (pre-norm)
  attn:   qkv = x W_qkv^T + b  reshaped [B, N, 3, H, D];  softmax(q k^T / sqrt(D)) v;  proj
          (with a mask, disallowed keys get -inf before the softmax)
  mlp:    fc2(GELU(fc1(x))), GELU exact: x/2 (1 + erf(x / sqrt 2))
  LayerNorm eps 1e-6 (biased variance); final norm; head on the class token (token 0).

Parameters are keyed by the names sparsevit's model registers (timm's names), so the C++ tests
copy them in by name. Only Debian's python3-torch is needed (run with /usr/bin/python3).
"""
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "patterns"))
import make_fibottention_reference_cases as fibo_reference  # noqa: E402  (the published masks)

# The tiny model every golden case uses: 16x16x3 images, 4x4 patches -> 16 patches + class token.
GEOMETRY = dict(img_size=16, patch_size=4, in_chans=3, embed_dim=16, depth=2, num_heads=2,
                mlp_ratio=4, num_classes=5)
LN_EPS = 1e-6
WEIGHT_SEED = 20261123


def num_tokens(g=GEOMETRY):
    return (g["img_size"] // g["patch_size"]) ** 2 + 1


def parameter_shapes(g=GEOMETRY):
    """(name, shape) for every parameter, in timm's names."""
    D, C, p = g["embed_dim"], g["in_chans"], g["patch_size"]
    hidden = int(D * g["mlp_ratio"])
    shapes = [("patch_embed.proj.weight", (D, C, p, p)), ("patch_embed.proj.bias", (D,)),
              ("cls_token", (1, 1, D)), ("pos_embed", (1, num_tokens(g), D))]
    for i in range(g["depth"]):
        b = f"blocks.{i}."
        shapes += [(b + "norm1.weight", (D,)), (b + "norm1.bias", (D,)),
                   (b + "attn.qkv.weight", (3 * D, D)), (b + "attn.qkv.bias", (3 * D,)),
                   (b + "attn.proj.weight", (D, D)), (b + "attn.proj.bias", (D,)),
                   (b + "norm2.weight", (D,)), (b + "norm2.bias", (D,)),
                   (b + "mlp.fc1.weight", (hidden, D)), (b + "mlp.fc1.bias", (hidden,)),
                   (b + "mlp.fc2.weight", (D, hidden)), (b + "mlp.fc2.bias", (D,))]
    shapes += [("norm.weight", (D,)), ("norm.bias", (D,)),
               ("head.weight", (g["num_classes"], D)), ("head.bias", (g["num_classes"],))]
    return shapes


def make_weights(g=GEOMETRY, seed=WEIGHT_SEED):
    """Deterministic weights, exactly representable in float32 (so a float32 model holds the
    same values), returned as float64. Scales chosen so every part of the model matters:
    weights ~ N(0, 1/fan_in) (attention scores of order 1, GELU inputs across its curve),
    norm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2); class token and position embedding
    N(0, 0.02^2) as timm initialises them, so the class token's row has a small variance and
    LayerNorm's eps shows in the output."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in parameter_shapes(g):
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        if name in ("cls_token", "pos_embed"):
            w = 0.02 * z
        elif name.endswith(".bias"):
            w = 0.1 * z
        elif ".norm" in name or name.startswith("norm"):
            w = 1.0 + 0.1 * z  # LayerNorm weights (biases handled above)
        else:
            fan_in = int(np.prod(shape[1:]))
            w = z / math.sqrt(fan_in)
        out[name] = w.to(torch.float32).to(torch.float64)
    return out


# ---- the model ------------------------------------------------------------------------------

def layer_norm(x, weight, bias, eps=LN_EPS):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased, as LayerNorm
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def linear(x, weight, bias):
    return x @ weight.t() + bias


def patch_embed(images, weight, bias, patch):
    """Conv2d(kernel = stride = patch) written as patchify + matmul; patches in raster order."""
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    patches = images.reshape(B, C, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5)
    patches = patches.reshape(B, gh * gw, C * patch * patch)
    return patches @ weight.reshape(weight.shape[0], -1).t() + bias


def softmax(scores):
    z = scores - scores.max(-1, keepdim=True).values
    e = torch.exp(z)
    return e / e.sum(-1, keepdim=True)


def attention(x, w, prefix, num_heads, allowed=None):
    """allowed: bool [H, N, N] (query row, key column) or None for dense attention."""
    B, N, C = x.shape
    D = C // num_heads
    qkv = linear(x, w[prefix + "qkv.weight"], w[prefix + "qkv.bias"]).reshape(B, N, 3, num_heads, D)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # each [B, H, N, D]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    if allowed is not None:
        scores = scores.masked_fill(~allowed.unsqueeze(0), float("-inf"))
    heads = softmax(scores) @ v
    return linear(heads.transpose(1, 2).reshape(B, N, C), w[prefix + "proj.weight"], w[prefix + "proj.bias"])


def vit_forward(w, images, layer_masks=None, g=GEOMETRY, global_pool=False):
    """Logits [B, classes]. layer_masks: one allowed-mask [H, N, N] (or None) per block.
    global_pool: MAE's finetuning head, fc_norm(mean of the patch tokens), no final norm."""
    B = images.shape[0]
    tokens = patch_embed(images, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], g["patch_size"])
    x = torch.cat([w["cls_token"].expand(B, -1, -1), tokens], dim=1) + w["pos_embed"]
    for i in range(g["depth"]):
        b = f"blocks.{i}."
        mask = layer_masks[i] if layer_masks is not None else None
        x = x + attention(layer_norm(x, w[b + "norm1.weight"], w[b + "norm1.bias"]), w, b + "attn.",
                          g["num_heads"], mask)
        h = gelu_erf(linear(layer_norm(x, w[b + "norm2.weight"], w[b + "norm2.bias"]),
                            w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"]))
        x = x + linear(h, w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])
    if global_pool:
        pooled = layer_norm(x[:, 1:].mean(1), w["fc_norm.weight"], w["fc_norm.bias"])
        return linear(pooled, w["head.weight"], w["head.bias"])
    x = layer_norm(x, w["norm.weight"], w["norm.bias"])
    return linear(x[:, 0], w["head.weight"], w["head.bias"])


# ---- losses (timm.loss) ---------------------------------------------------------------------

def log_softmax(logits):
    m = logits.max(-1, keepdim=True).values
    return logits - m - torch.log(torch.exp(logits - m).sum(-1, keepdim=True))


def cross_entropy(logits, labels):
    return -log_softmax(logits).gather(1, labels.unsqueeze(1)).squeeze(1).mean()


def label_smoothing_cross_entropy(logits, labels, smoothing):
    """timm's LabelSmoothingCrossEntropy: (1 - s) * nll + s * mean over classes of -log p."""
    logp = log_softmax(logits)
    nll = -logp.gather(1, labels.unsqueeze(1)).squeeze(1)
    return ((1.0 - smoothing) * nll + smoothing * (-logp.mean(-1))).mean()


# ---- masks ----------------------------------------------------------------------------------

def local_mask(N, windows, dilation=1, include_diagonal=True):
    """mask `local` with a global class token: key k is allowed for query j iff j == 0 or
    k == 0 or (|j - k| <= w_h and |j - k| is a multiple of the dilation, the diagonal only when
    include_diagonal). windows: one half-width per head."""
    j = torch.arange(N).unsqueeze(1)
    k = torch.arange(N).unsqueeze(0)
    d = (j - k).abs()
    heads = []
    for w in windows:
        m = (d <= w) & (d % dilation == 0)
        if not include_diagonal:
            m &= d != 0
        heads.append(m | (j == 0) | (k == 0))
    return torch.stack(heads)


def fibottention_reference_mask(N, H, layer):
    """The published Fibottention implementation's mask (its quirks included), from
    tests/patterns/make_fibottention_reference_cases.py: sparsevit's `compat: reference`."""
    _, masks = fibo_reference.masks(N - 1, H, False, layer)
    return torch.tensor(masks, dtype=torch.bool)


# ---- synthetic data both languages generate -------------------------------------------------

MASK64 = (1 << 64) - 1


class SplitMix64:
    """Vigna's splitmix64 generator; the C++ test implements the same 10 lines."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def synthetic_batches(seed, num_batches, batch, g=GEOMETRY):
    """num_batches (images [B, C, S, S], labels [B]) from one splitmix64 stream: per batch, every
    pixel in C order as (2 * (r >> 56) - 255) / 128 (exact in float32, in [-2, 2)), then every
    label as r % num_classes."""
    rng = SplitMix64(seed)
    C, S = g["in_chans"], g["img_size"]
    out = []
    for _ in range(num_batches):
        pixels = [(2 * (rng.next() >> 56) - 255) / 128.0 for _ in range(batch * C * S * S)]
        labels = [rng.next() % g["num_classes"] for _ in range(batch)]
        out.append((torch.tensor(pixels, dtype=torch.float64).reshape(batch, C, S, S),
                    torch.tensor(labels, dtype=torch.int64)))
    return out


# ---- fixture writing ------------------------------------------------------------------------

def float32_literal(v):
    """Shortest text that round-trips the float32 value, as a C++ float literal."""
    s = str(np.float32(v))
    if "." not in s and "e" not in s:
        s += ".0"
    return s + "f"


def float64_literal(v):
    """Shortest text that round-trips the double."""
    return repr(float(v))


def wrap(items, per_line=8, indent="    "):
    return "\n".join(indent + ", ".join(items[i:i + per_line]) + "," for i in range(0, len(items), per_line))


def cpp_float32_array(name, tensor):
    values = [float32_literal(v) for v in tensor.reshape(-1).tolist()]
    return f"inline const float {name}[] = {{\n{wrap(values)}\n}};\n"


def cpp_float64_array(name, tensor):
    values = [float64_literal(v) for v in tensor.reshape(-1).tolist()]
    return f"inline const double {name}[] = {{\n{wrap(values, 4)}\n}};\n"


def generated_by(script):
    return (f"// Generated by tests/golden/{script} (Python {sys.version.split()[0]}, PyTorch {torch.__version__});"
            f" do not edit.\n// Regenerate: /usr/bin/python3 tests/golden/{script}\n")


def vit_forward_functional(w, images, layer_masks=None, g=GEOMETRY):
    """The same model through torch.nn.functional's conv2d / layer_norm / gelu / softmax: a
    cross-check of the hand-written formulas above (the scripts assert they agree)."""
    import torch.nn.functional as F
    B, D, H = images.shape[0], g["embed_dim"], g["num_heads"]
    x = F.conv2d(images, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=g["patch_size"])
    x = torch.cat([w["cls_token"].expand(B, -1, -1), x.flatten(2).transpose(1, 2)], dim=1) + w["pos_embed"]
    N = x.shape[1]
    for i in range(g["depth"]):
        b = f"blocks.{i}."
        y = F.layer_norm(x, (D,), w[b + "norm1.weight"], w[b + "norm1.bias"], eps=LN_EPS)
        q, k, v = F.linear(y, w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"]).reshape(
            B, N, 3, H, D // H).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1) * (D // H) ** -0.5
        if layer_masks is not None and layer_masks[i] is not None:
            s = s.masked_fill(~layer_masks[i], float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, N, D)
        x = x + F.linear(a, w[b + "attn.proj.weight"], w[b + "attn.proj.bias"])
        y = F.layer_norm(x, (D,), w[b + "norm2.weight"], w[b + "norm2.bias"], eps=LN_EPS)
        y = F.gelu(F.linear(y, w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"]))
        x = x + F.linear(y, w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])
    x = F.layer_norm(x, (D,), w["norm.weight"], w["norm.bias"], eps=LN_EPS)
    return F.linear(x[:, 0], w["head.weight"], w["head.bias"])
