"""An independent float64 reference of MAE's MaskedAutoencoderViT.forward (He et al. 2022,
facebookresearch/mae models_mae.py), for tests/models/masked_autoencoder_golden_test.cpp.

Written from MAE's code with explicit formulas (the blocks are vit_reference.py's):
  encoder:  x = PatchEmbed(imgs) + pos_embed[1:];  random_masking by argsort of noise
            (ids_keep = the len_keep = int(P (1 - mask_ratio)) smallest);  prepend
            cls_token + pos_embed[0];  blocks;  norm
  decoder:  decoder_embed;  append mask tokens and unshuffle with ids_restore;  + decoder_pos_embed;
            blocks;  decoder_norm;  decoder_pred;  drop the class token
  loss:     mean over masked patches of the per-patch MSE to patchify(imgs)
            (norm_pix_loss: target normalised per patch by its mean and unbiased variance + 1e-6)
  pos embeds: fixed 2-D sin-cos tables (numpy, float64), MAE's get_2d_sincos_pos_embed.

order="mae" keeps the visible tokens in MAE's shuffled order; order="raster" sorts them (what
sparsevit does, so that a sparse pattern's offsets are well defined).
"""
import numpy as np
import torch

import vit_reference as ref

# The tiny MAE: 16x16x3 images, patch 4 (16 patches), encoder 16 wide / 2 blocks / 2 heads,
# decoder 8 wide / 1 block / 2 heads, mask ratio 0.75 -> 4 visible patches (+ class = 5 tokens).
GEOMETRY = dict(img_size=16, patch_size=4, in_chans=3, embed_dim=16, depth=2, num_heads=2,
                decoder_embed_dim=8, decoder_depth=1, decoder_num_heads=2, mlp_ratio=4, mask_ratio=0.75)
WEIGHT_SEED = 20261124


def num_patches(g=GEOMETRY):
    return (g["img_size"] // g["patch_size"]) ** 2


def len_keep(g=GEOMETRY):
    return int(num_patches(g) * (1 - g["mask_ratio"]))


def sincos_1d(embed_dim, pos):
    omega = np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0)
    omega = 1.0 / 10000 ** omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sincos_2d(embed_dim, grid_size, cls_token):
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0)  # w goes first, as MAE
    emb = np.concatenate([sincos_1d(embed_dim // 2, grid[0]), sincos_1d(embed_dim // 2, grid[1])], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)
    return torch.from_numpy(emb).to(torch.float32).to(torch.float64).unsqueeze(0)


def block_shapes(prefix, D, hidden):
    return [(prefix + "norm1.weight", (D,)), (prefix + "norm1.bias", (D,)),
            (prefix + "attn.qkv.weight", (3 * D, D)), (prefix + "attn.qkv.bias", (3 * D,)),
            (prefix + "attn.proj.weight", (D, D)), (prefix + "attn.proj.bias", (D,)),
            (prefix + "norm2.weight", (D,)), (prefix + "norm2.bias", (D,)),
            (prefix + "mlp.fc1.weight", (hidden, D)), (prefix + "mlp.fc1.bias", (hidden,)),
            (prefix + "mlp.fc2.weight", (D, hidden)), (prefix + "mlp.fc2.bias", (D,))]


def parameter_shapes(g=GEOMETRY):
    """MAE's trainable parameters by name (the fixed pos embeds are computed, not stored)."""
    D, Dd, C, p = g["embed_dim"], g["decoder_embed_dim"], g["in_chans"], g["patch_size"]
    shapes = [("cls_token", (1, 1, D)), ("patch_embed.proj.weight", (D, C, p, p)), ("patch_embed.proj.bias", (D,))]
    for i in range(g["depth"]):
        shapes += block_shapes(f"blocks.{i}.", D, D * g["mlp_ratio"])
    shapes += [("norm.weight", (D,)), ("norm.bias", (D,)), ("mask_token", (1, 1, Dd)),
               ("decoder_embed.weight", (Dd, D)), ("decoder_embed.bias", (Dd,))]
    for i in range(g["decoder_depth"]):
        shapes += block_shapes(f"decoder_blocks.{i}.", Dd, Dd * g["mlp_ratio"])
    shapes += [("decoder_norm.weight", (Dd,)), ("decoder_norm.bias", (Dd,)),
               ("decoder_pred.weight", (p * p * C, Dd)), ("decoder_pred.bias", (p * p * C,))]
    return shapes


def make_weights(g=GEOMETRY, seed=WEIGHT_SEED):
    """Deterministic float32-representable weights (as float64), scaled like vit_reference's."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in parameter_shapes(g):
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        if name in ("cls_token", "mask_token"):
            w = 0.02 * z
        elif name.endswith(".bias"):
            w = 0.1 * z
        elif "norm" in name:
            w = 1.0 + 0.1 * z
        else:
            w = z / np.sqrt(int(np.prod(shape[1:])))
        out[name] = w.to(torch.float32).to(torch.float64)
    return out


def patchify(imgs, p):
    B, C, H, W = imgs.shape
    h, w = H // p, W // p
    x = imgs.reshape(B, C, h, p, w, p)
    x = torch.einsum("nchpwq->nhwpqc", x)
    return x.reshape(B, h * w, p * p * C)


def block(x, w, prefix, heads, mask=None):
    x = x + ref.attention(ref.layer_norm(x, w[prefix + "norm1.weight"], w[prefix + "norm1.bias"]), w, prefix + "attn.",
                          heads, mask)
    h = ref.gelu_erf(ref.linear(ref.layer_norm(x, w[prefix + "norm2.weight"], w[prefix + "norm2.bias"]),
                                w[prefix + "mlp.fc1.weight"], w[prefix + "mlp.fc1.bias"]))
    return x + ref.linear(h, w[prefix + "mlp.fc2.weight"], w[prefix + "mlp.fc2.bias"])


def mae_forward(w, imgs, noise, order="mae", norm_pix_loss=False, encoder_masks=None, g=GEOMETRY):
    """(loss, pred [B, P, p*p*C], mask [B, P]); encoder_masks: allowed [H, N, N] per encoder block."""
    B, P, keep, p = imgs.shape[0], num_patches(g), len_keep(g), g["patch_size"]
    grid = g["img_size"] // p
    pos = sincos_2d(g["embed_dim"], grid, True)
    dpos = sincos_2d(g["decoder_embed_dim"], grid, True)
    x = ref.patch_embed(imgs, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], p) + pos[:, 1:]
    ids_shuffle = torch.argsort(noise, dim=1)
    if order == "raster":
        kept = ids_shuffle[:, :keep].sort(dim=1).values
        ids_shuffle = torch.cat([kept, ids_shuffle[:, keep:]], dim=1)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    ids_keep = ids_shuffle[:, :keep]
    x = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, x.shape[2]))
    mask = torch.ones(B, P, dtype=torch.float64)
    mask[:, :keep] = 0
    mask = torch.gather(mask, 1, ids_restore)
    x = torch.cat([(w["cls_token"] + pos[:, :1]).expand(B, -1, -1), x], dim=1)
    for i in range(g["depth"]):
        x = block(x, w, f"blocks.{i}.", g["num_heads"], None if encoder_masks is None else encoder_masks[i])
    x = ref.layer_norm(x, w["norm.weight"], w["norm.bias"])

    x = ref.linear(x, w["decoder_embed.weight"], w["decoder_embed.bias"])
    mask_tokens = w["mask_token"].repeat(B, P + 1 - x.shape[1], 1)
    x_ = torch.cat([x[:, 1:], mask_tokens], dim=1)
    x_ = torch.gather(x_, 1, ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
    x = torch.cat([x[:, :1], x_], dim=1) + dpos
    for i in range(g["decoder_depth"]):
        x = block(x, w, f"decoder_blocks.{i}.", g["decoder_num_heads"])
    x = ref.layer_norm(x, w["decoder_norm.weight"], w["decoder_norm.bias"])
    pred = ref.linear(x, w["decoder_pred.weight"], w["decoder_pred.bias"])[:, 1:]

    target = patchify(imgs, p)
    if norm_pix_loss:
        mean = target.mean(dim=-1, keepdim=True)
        var = target.var(dim=-1, keepdim=True)
        target = (target - mean) / (var + 1.e-6) ** .5
    loss = ((pred - target) ** 2).mean(dim=-1)
    loss = (loss * mask).sum() / mask.sum()
    return loss, pred, mask
