"""An independent float64 reference of TimeSformer (Bertasius, Wang and Torresani, "Is Space-Time
Attention All You Need for Video Understanding?", ICML 2021) as its published code builds it:
facebookresearch/TimeSformer, timesformer/models/vit.py (VisionTransformer.forward_features,
Block.forward, PatchEmbed.forward, Attention.forward), for the golden test
tests/models/timesformer_golden_test.cpp (fixture written by make_timesformer_golden.py).

Written with explicit formulas and explicit token indices instead of torch.nn modules and
einops, so a change in sparsevit's C++ model cannot change the reference. The per-token pieces
(LayerNorm eps 1e-6, exact GELU, multi-head attention with an optional allowed-mask, the
patch embedding) are vit_reference.py's. Video input x [B, C, T, H, W]; P patches per frame,
in raster order; D = embed_dim.

  frames:     frame (b, t) = x[b, :, t]; row b*T + t of the per-frame batch ('(b t) c h w')
  per frame:  [cls_token ; PatchEmbed(frame)] + pos_embed            -> [(B T), P + 1, D]
  space_only: ViT blocks on each frame; then the mean over t of the B*T frames' tokens
              ('(b t) n m -> b t n m', mean over t); final norm; head on token 0
  otherwise:  cls = rows 0..B-1 of token 0 (the published code's x[:B, 0]; every row's token 0
              is cls_token + pos_embed[0], so which rows does not matter); patch token (n, t)
              of clip b gets + time_embed[t] and goes to position 1 + n*T + t (patch-major,
              frames inner: '(b t) n m -> (b n) t m -> b (n t) m'); sequence [cls ; tokens]
              of 1 + P*T tokens; the blocks; final norm; head on token 0
  joint_space_time block: x = x + attn(norm1(x)); x = x + mlp(norm2(x)) on the whole sequence
  divided_space_time block (Block.forward):
     temporal: for each clip b and patch n the T tokens (n, 0..T-1) ('b (h w t) m ->
               (b h w) t m'); r = temporal_attn(temporal_norm1(.)), no prefix token;
               xt(n, t) = x(n, t) + temporal_fc(r(n, t))
     spatial:  for each clip b and frame t the sequence [x_cls ; xt(0, t) .. xt(P-1, t)]
               (the class token repeated per frame, 'b (h w t) m -> (b t) (h w) m');
               s = attn(norm1(.)); s_cls = mean over t of s[(b, t), 0]
     x_cls <- x_cls + s_cls;  x(n, t) <- xt(n, t) + s[(b, t), 1 + n]
     x = x + mlp(norm2(x))
  Attention: qkv with bias (qkv_bias=True), scale head_dim^-0.5, softmax, proj. A spatial mask
  (bool [heads, P + 1, P + 1]) applies to every `attn` call of a divided or space_only block
  (one frame's P + 1 tokens, class token first); a temporal mask (bool [heads, T, T]) to every
  `temporal_attn` call. Dropout and drop path are identities (inference).

Parameters are keyed by TimeSformer's names without its `model.` wrapper prefix. Only Debian's
python3-torch is needed (run with /usr/bin/python3).
"""
import math

import torch

import vit_reference as ref

ATTENTION_TYPES = ("divided_space_time", "space_only", "joint_space_time")

# The tiny model of every case: 8x8x3 frames, 4x4 patches -> P = 4 patches (+ class token),
# T = 4 frames (a clip has 1 + 16 tokens).
GEOMETRY = dict(img_size=8, patch_size=4, in_chans=3, embed_dim=16, depth=2, num_heads=2,
                mlp_ratio=4, num_classes=5, num_frames=4)
WEIGHT_SEED = 20261124


def num_patches(g=GEOMETRY):
    return (g["img_size"] // g["patch_size"]) ** 2


def parameter_shapes(attention_type, g=GEOMETRY):
    """(name, shape) for every parameter of VisionTransformer(attention_type), in the order the
    published module registers them (TimeSformer's names, no `model.` prefix)."""
    assert attention_type in ATTENTION_TYPES, attention_type
    D, C, p = g["embed_dim"], g["in_chans"], g["patch_size"]
    hidden = int(D * g["mlp_ratio"])
    shapes = [("cls_token", (1, 1, D)), ("pos_embed", (1, num_patches(g) + 1, D))]
    if attention_type != "space_only":
        shapes.append(("time_embed", (1, g["num_frames"], D)))
    shapes += [("patch_embed.proj.weight", (D, C, p, p)), ("patch_embed.proj.bias", (D,))]
    for i in range(g["depth"]):
        b = f"blocks.{i}."
        shapes += [(b + "norm1.weight", (D,)), (b + "norm1.bias", (D,)),
                   (b + "attn.qkv.weight", (3 * D, D)), (b + "attn.qkv.bias", (3 * D,)),
                   (b + "attn.proj.weight", (D, D)), (b + "attn.proj.bias", (D,))]
        if attention_type == "divided_space_time":
            shapes += [(b + "temporal_norm1.weight", (D,)), (b + "temporal_norm1.bias", (D,)),
                       (b + "temporal_attn.qkv.weight", (3 * D, D)), (b + "temporal_attn.qkv.bias", (3 * D,)),
                       (b + "temporal_attn.proj.weight", (D, D)), (b + "temporal_attn.proj.bias", (D,)),
                       (b + "temporal_fc.weight", (D, D)), (b + "temporal_fc.bias", (D,))]
        shapes += [(b + "norm2.weight", (D,)), (b + "norm2.bias", (D,)),
                   (b + "mlp.fc1.weight", (hidden, D)), (b + "mlp.fc1.bias", (hidden,)),
                   (b + "mlp.fc2.weight", (D, hidden)), (b + "mlp.fc2.bias", (D,))]
    shapes += [("norm.weight", (D,)), ("norm.bias", (D,)),
               ("head.weight", (g["num_classes"], D)), ("head.bias", (g["num_classes"],))]
    return shapes


def make_weights(g=GEOMETRY, seed=WEIGHT_SEED):
    """Deterministic weights of the divided_space_time model (the superset of names), exactly
    representable in float32, returned as float64; space_only / joint_space_time use the subset
    parameter_shapes names. Scales as vit_reference.make_weights: matrices N(0, 1/fan_in),
    LayerNorm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2); cls_token, pos_embed and time_embed
    N(0, 0.02^2). temporal_fc is a full random matrix (the published init zeroes it in every
    block but the first, which would hide the temporal path)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in parameter_shapes("divided_space_time", g):
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        if name in ("cls_token", "pos_embed", "time_embed"):
            w = 0.02 * z
        elif name.endswith(".bias"):
            w = 0.1 * z
        elif name.split(".")[-2] in ("norm1", "temporal_norm1", "norm2", "norm"):
            w = 1.0 + 0.1 * z  # LayerNorm weights: norm1, temporal_norm1, norm2, norm
        else:
            fan_in = 1
            for s in shape[1:]:
                fan_in *= s
            w = z / math.sqrt(fan_in)
        out[name] = w.to(torch.float32).to(torch.float64)
    return out


def weights_for(weights, attention_type, g=GEOMETRY):
    return {name: weights[name] for name, _ in parameter_shapes(attention_type, g)}


# ---- masks ----------------------------------------------------------------------------------

def spatial_local_mask(windows, g=GEOMETRY):
    """mask `local` over one frame's P + 1 tokens with the class token global (vit_reference)."""
    return ref.local_mask(num_patches(g) + 1, windows)


def temporal_local_mask(windows, T, include_diagonal=True):
    """mask `local` over T frame tokens with no prefix token: key k allowed for query j iff
    |j - k| <= w_h (j != k unless include_diagonal). One half-width per head."""
    j = torch.arange(T).unsqueeze(1)
    k = torch.arange(T).unsqueeze(0)
    d = (j - k).abs()
    heads = []
    for w in windows:
        m = d <= w
        if not include_diagonal:
            m &= d != 0
        heads.append(m)
    return torch.stack(heads)


# ---- the model ------------------------------------------------------------------------------

def _norm(x, w, name):
    return ref.layer_norm(x, w[name + ".weight"], w[name + ".bias"])


def _mlp(x, w, b):
    h = ref.gelu_erf(ref.linear(_norm(x, w, b + "norm2"), w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"]))
    return ref.linear(h, w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])


def plain_block(x, w, b, num_heads, allowed=None):
    """space_only / joint_space_time: the pre-norm ViT block."""
    x = x + ref.attention(_norm(x, w, b + "norm1"), w, b + "attn.", num_heads, allowed)
    return x + _mlp(x, w, b)


def divided_block(x, w, b, num_heads, B, T, P, spatial=None, temporal=None):
    """x [B, 1 + P*T, D], patch token (n, t) at 1 + n*T + t."""
    def pos(n, t):
        return 1 + n * T + t

    # temporal attention: one sequence of T tokens per (clip, patch)
    seqs = torch.stack([torch.stack([x[bb, pos(n, t)] for t in range(T)]) for bb in range(B) for n in range(P)])
    r = ref.attention(_norm(seqs, w, b + "temporal_norm1"), w, b + "temporal_attn.", num_heads, temporal)
    r = ref.linear(r, w[b + "temporal_fc.weight"], w[b + "temporal_fc.bias"])  # [(B P), T, D]
    xt = x.clone()
    for bb in range(B):
        for n in range(P):
            for t in range(T):
                xt[bb, pos(n, t)] = x[bb, pos(n, t)] + r[bb * P + n, t]

    # spatial attention: one sequence [class token ; P patches] per (clip, frame)
    frames = torch.stack([torch.stack([x[bb, 0]] + [xt[bb, pos(n, t)] for n in range(P)])
                          for bb in range(B) for t in range(T)])
    s = ref.attention(_norm(frames, w, b + "norm1"), w, b + "attn.", num_heads, spatial)  # [(B T), P+1, D]
    out = torch.empty_like(x)
    for bb in range(B):
        out[bb, 0] = x[bb, 0] + s[bb * T:(bb + 1) * T, 0].mean(0)
        for n in range(P):
            for t in range(T):
                out[bb, pos(n, t)] = xt[bb, pos(n, t)] + s[bb * T + t, 1 + n]
    return out + _mlp(out, w, b)


def frame_tokens(w, clips, g=GEOMETRY):
    """[(B T), P + 1, D]: row b*T + t = [cls ; PatchEmbed(x[b, :, t])] + pos_embed."""
    B, C, T, H, W = clips.shape
    rows = []
    for bb in range(B):
        for t in range(T):
            tokens = ref.patch_embed(clips[bb:bb + 1, :, t], w["patch_embed.proj.weight"],
                                     w["patch_embed.proj.bias"], g["patch_size"])[0]
            rows.append(torch.cat([w["cls_token"][0], tokens]) + w["pos_embed"][0])
    return torch.stack(rows)


def timesformer_forward(w, clips, attention_type, spatial=None, temporal=None, g=GEOMETRY):
    """Logits [B, classes] of clips [B, C, T, H, W]. spatial: allowed-mask [heads, P+1, P+1] for
    `attn` (divided_space_time and space_only), temporal: [heads, T, T] for `temporal_attn`;
    None = dense. The same masks in every block."""
    assert attention_type in ATTENTION_TYPES, attention_type
    B, T = clips.shape[0], clips.shape[2]
    assert T == g["num_frames"]
    P, H = num_patches(g), g["num_heads"]
    per_frame = frame_tokens(w, clips, g)
    if attention_type == "space_only":
        assert temporal is None
        x = per_frame
        for i in range(g["depth"]):
            x = plain_block(x, w, f"blocks.{i}.", H, spatial)
        x = torch.stack([x[bb * T:(bb + 1) * T].mean(0) for bb in range(B)])  # mean over the frames
    else:
        cls = per_frame[:B, 0]  # the published x[:B, 0, :]
        x = torch.empty(B, 1 + P * T, g["embed_dim"], dtype=per_frame.dtype)
        for bb in range(B):
            x[bb, 0] = cls[bb]
            for n in range(P):
                for t in range(T):
                    x[bb, 1 + n * T + t] = per_frame[bb * T + t, 1 + n] + w["time_embed"][0, t]
        for i in range(g["depth"]):
            b = f"blocks.{i}."
            if attention_type == "joint_space_time":
                assert spatial is None and temporal is None
                x = plain_block(x, w, b, H)
            else:
                x = divided_block(x, w, b, H, B, T, P, spatial, temporal)
    x = _norm(x, w, "norm")
    return ref.linear(x[:, 0], w["head.weight"], w["head.bias"])


# ---- a second formulation, for the generator's self-check -----------------------------------

def timesformer_forward_functional(w, clips, attention_type, spatial=None, temporal=None, g=GEOMETRY):
    """The same model through torch.nn.functional (conv2d, layer_norm, gelu, softmax) with each
    einops rearrange of the published code written as reshape / permute: a cross-check of the
    explicit token indices above (make_timesformer_golden.py asserts they agree)."""
    import torch.nn.functional as F
    B, C, T, Hi, Wi = clips.shape
    D, nh = g["embed_dim"], g["num_heads"]
    eps = ref.LN_EPS

    def ln(x, name):
        return F.layer_norm(x, (D,), w[name + ".weight"], w[name + ".bias"], eps=eps)

    def attn(x, prefix, mask):
        Bn, N, _ = x.shape
        q, k, v = F.linear(x, w[prefix + "qkv.weight"], w[prefix + "qkv.bias"]).reshape(
            Bn, N, 3, nh, D // nh).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1) * (D // nh) ** -0.5
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return F.linear((s.softmax(-1) @ v).transpose(1, 2).reshape(Bn, N, D), w[prefix + "proj.weight"],
                        w[prefix + "proj.bias"])

    def mlp(x, b):
        return F.linear(F.gelu(F.linear(ln(x, b + "norm2"), w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"])),
                        w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])

    frames = clips.permute(0, 2, 1, 3, 4).reshape(B * T, C, Hi, Wi)  # b c t h w -> (b t) c h w
    x = F.conv2d(frames, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=g["patch_size"])
    x = x.flatten(2).transpose(1, 2)
    P = x.shape[1]
    x = torch.cat([w["cls_token"].expand(B * T, -1, -1), x], 1) + w["pos_embed"]
    if attention_type != "space_only":
        cls = x[:B, 0].unsqueeze(1)
        x = x[:, 1:].reshape(B, T, P, D).permute(0, 2, 1, 3).reshape(B * P, T, D)  # (b t) n m -> (b n) t m
        x = x + w["time_embed"]
        x = torch.cat([cls, x.reshape(B, P * T, D)], 1)  # (b n) t m -> b (n t) m
    for i in range(g["depth"]):
        b = f"blocks.{i}."
        if attention_type != "divided_space_time":
            x = x + attn(ln(x, b + "norm1"), b + "attn.", spatial)
            x = x + mlp(x, b)
            continue
        xt = x[:, 1:].reshape(B * P, T, D)  # b (h w t) m -> (b h w) t m
        r = attn(ln(xt, b + "temporal_norm1"), b + "temporal_attn.", temporal).reshape(B, P * T, D)
        xt = x[:, 1:] + F.linear(r, w[b + "temporal_fc.weight"], w[b + "temporal_fc.bias"])
        init_cls = x[:, 0:1]
        cls = init_cls.repeat(1, T, 1).reshape(B * T, 1, D)  # b t m -> (b t) m, unsqueeze(1)
        xs = xt.reshape(B, P, T, D).permute(0, 2, 1, 3).reshape(B * T, P, D)  # b (h w t) m -> (b t) (h w) m
        s = attn(ln(torch.cat([cls, xs], 1), b + "norm1"), b + "attn.", spatial)
        s_cls = s[:, 0].reshape(B, T, D).mean(1, keepdim=True)
        s_patch = s[:, 1:].reshape(B, T, P, D).permute(0, 2, 1, 3).reshape(B, P * T, D)  # -> b (h w t) m
        x = torch.cat([init_cls, xt], 1) + torch.cat([s_cls, s_patch], 1)
        x = x + mlp(x, b)
    if attention_type == "space_only":
        x = x.reshape(B, T, P + 1, D).mean(1)  # (b t) n m -> b t n m, mean over t
    x = ln(x, "norm")
    return F.linear(x[:, 0], w["head.weight"], w["head.bias"])
