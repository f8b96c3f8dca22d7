"""A small timm-style ViT with sparsevit.nn.SparseAttention (Fibottention) trained on
Fashion-MNIST read with numpy from Debian's dataset-fashion-mnist. From the checkout:

    PYTHONPATH=python /usr/bin/python3 examples/python/train_fashion_mnist.py [--steps 300]
"""
import argparse, gzip, os
import numpy as np
import torch
from torch import nn
import sparsevit

DATA, ROOT = "/usr/share/datasets/fashion-mnist", os.path.join(os.path.dirname(__file__), "..", "..")
CFG = os.path.join(ROOT, "configs", "attention", "vit_fibottention_small.yaml")


def idx(name, offset):  # IDX files: a header, then uint8 data
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


class Block(nn.Module):
    def __init__(self, dim, heads, layer, depth):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = sparsevit.nn.SparseAttention(dim, heads, qkv_bias=True, attn_cfg=CFG, layer=layer, num_layers=depth)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Vit(nn.Module):  # 28x28 images, 4x4 patches: N = 50 tokens
    def __init__(self, dim=64, depth=4, heads=4):
        super().__init__()
        self.patch = nn.Conv2d(1, dim, 4, 4)
        self.cls, self.pos = nn.Parameter(torch.zeros(1, 1, dim)), nn.Parameter(torch.randn(1, 50, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, i, depth) for i in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    torch.manual_seed(0)
    prep = lambda a: (torch.from_numpy(a.reshape(-1, 1, 28, 28).astype(np.float32)) / 255 - 0.286) / 0.353
    x_train, y_train = prep(idx("train-images-idx3-ubyte.gz", 16)), torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    x_test, y_test = prep(idx("t10k-images-idx3-ubyte.gz", 16)), torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    model = Vit()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    for step in range(args.steps):
        batch = torch.randint(0, len(x_train), (args.batch,))
        loss = nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        acc = sum((model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item() for i in range(0, 2000, 1000))
    print(f"top-1 on 2000 test images after {args.steps} steps: {acc / 20:.2f}%")


if __name__ == "__main__":
    main()
