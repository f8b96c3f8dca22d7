#!/usr/bin/env python3
"""PyTorch eager training speed of the ViTs `sparsevit bench --model` times, for the
"our dense training >= PyTorch eager" comparison (docs/performance.md).

The model is timm's VisionTransformer written out with torch.nn (so nothing but Debian's
python3-torch is needed): PatchEmbed conv, class token, position embedding, pre-norm blocks
(LayerNorm eps 1e-6, qkv with bias, softmax(q k^T / sqrt(D)) v as timm's Attention computes it,
proj, MLP with exact GELU), final norm, head on the class token. A training step is what
`sparsevit finetune` does per batch: forward, label-smoothed cross entropy, backward, AdamW
step (decay on >= 2-D weights), zero_grad. Batches are random tensors already in memory, as in
`sparsevit bench --model --backward`, so data loading is not measured by either.

    OMP_NUM_THREADS=2 python3 bench/vit_train_pytorch.py --model vit_nano_patch2_28 --batch 128 --threads 2

`--attention sdpa` (torch >= 2.0) computes attention with F.scaled_dot_product_attention, as timm
does when its fused_attn is on (the PyTorch 2.x peer of bench/peers_bench.py); the default,
`eager`, is the matmul-softmax-matmul above.

prints one JSON line: images_per_second (median step), median_ms, params.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name: (img_size, patch, in_chans, embed_dim, depth, heads, classes) as src/models/model_shapes.cpp
MODELS = {
    "vit_nano_patch2_28": (28, 2, 1, 64, 4, 4, 10),
    "vit_nano_patch4_28": (28, 4, 1, 64, 6, 4, 10),
    "vit_tiny_patch2_28": (28, 2, 1, 192, 12, 3, 10),
    "vit_tiny_patch16_224": (224, 16, 3, 192, 12, 3, 1000),
    "vit_tiny_patch8_448": (448, 8, 3, 192, 12, 3, 1000),
}


class Attention(nn.Module):
    def __init__(self, dim, heads, sdpa=False):
        super().__init__()
        self.num_heads = heads
        self.sdpa = sdpa
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):  # timm's Attention.forward (fused_attn off: torch 1.13 has no SDPA)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if self.sdpa:  # timm's fused_attn path: torch's fused kernel, scale 1/sqrt(D)
            x = F.scaled_dot_product_attention(q, k, v)
            return self.proj(x.transpose(1, 2).reshape(B, N, C))
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, heads, sdpa=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, sdpa)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class VisionTransformer(nn.Module):
    def __init__(self, img, patch, chans, dim, depth, heads, classes, sdpa=False):
        super().__init__()
        self.patch_embed = nn.Conv2d(chans, dim, patch, stride=patch)
        n = (img // patch) ** 2 + 1
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, sdpa) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="vit_nano_patch2_28", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (median reported)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--forward", action="store_true", help="time inference (no_grad forward) instead")
    ap.add_argument("--attention", default="eager", choices=["eager", "sdpa"],
                    help="eager: matmul-softmax-matmul (default); sdpa: F.scaled_dot_product_attention (torch >= 2.0)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    img, patch, chans, dim, depth, heads, classes = MODELS[a.model]
    model = VisionTransformer(img, patch, chans, dim, depth, heads, classes, sdpa=a.attention == "sdpa")
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    x = torch.randn(a.batch, chans, img, img)
    y = torch.randint(0, classes, (a.batch,))

    def step():
        if a.forward:
            with torch.no_grad():
                model.eval()
                model(x)
            return
        model.train()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    result = {"framework": f"pytorch {torch.__version__} {a.attention}", "model": a.model, "batch": a.batch,
              "threads": torch.get_num_threads(), "pass": "forward" if a.forward else "train_step",
              "median_ms": med * 1e3, "images_per_second": a.batch / med,
              "params": sum(p.numel() for p in model.parameters())}
    if a.attention != "eager":  # the eager output stays as it was
        result.update(attention=a.attention, times_ms=[t * 1e3 for t in times])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
