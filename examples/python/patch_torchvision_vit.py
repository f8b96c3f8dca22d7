"""Patch torchvision's vit_b_16 (random init, nothing downloaded) with Fibottention and time a
forward dense vs sparse. Run from the checkout after scripts/test:

    PYTHONPATH=python /usr/bin/python3 examples/python/patch_torchvision_vit.py [--batch 2] [--repeats 3]
"""
import argparse
import copy
import os
import time

import torch
import torchvision

import sparsevit

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def median_seconds(model, x, repeats):
    times = []
    with torch.no_grad():
        model(x)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--attn-cfg", default=os.path.join(ROOT, "configs", "attention", "vit_fibottention.yaml"))
    args = parser.parse_args()
    torch.manual_seed(0)
    dense = torchvision.models.vit_b_16().eval()  # weights=None: random init
    sparse = copy.deepcopy(dense)
    report = sparsevit.patch_model(sparse, args.attn_cfg)
    x = torch.randn(args.batch, 3, 224, 224)
    t_dense, t_sparse = median_seconds(dense, x, args.repeats), median_seconds(sparse, x, args.repeats)
    print(f"patched {report['layers_patched']} layers ({report['layout']}), N = {report['tokens']}: pruning ratio "
          f"{report['pruning_ratio']:.4f}, attention GFLOPs {report['attention_gflops']:.4f} per image")
    print(f"forward, batch {args.batch}, median of {args.repeats}: dense {t_dense * 1e3:.1f} ms, "
          f"sparse {t_sparse * 1e3:.1f} ms ({t_dense / t_sparse:.2f}x)")


if __name__ == "__main__":
    main()
