#!/usr/bin/env python3
"""Markdown tables of docs/performance.md from the JSON files bench/performance.sh writes.

    python3 bench/performance_tables.py [docs/results/performance]
"""
import json
import os
import sys

D = sys.argv[1] if len(sys.argv) > 1 else "docs/results/performance"


def load(name):
    path = os.path.join(D, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def metrics_ips(name):
    path = os.path.join(D, name, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.loads(f.readline())["train_images_per_second"]


def operator_table():
    print("| N | density | pass | dense ms | sparse ms | speed-up | ideal 1/density | fraction of ideal | target | sparse GFLOP/s (sgemm) | before: sparse ms (fraction) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    targets = {(197, "fwd"): 0.6, (197, "bwd"): 0.5, (1025, "fwd"): 0.9, (1025, "bwd"): 0.75}
    for n in (197, 577, 1025):
        for p in ("fwd", "bwd"):
            r = load(f"op_N{n}_{p}.json")
            if not r:
                continue
            b = load(f"op_N{n}_{p}_before.json")
            before = f"{b['sparse_ms']:.2f} ({b['fraction_of_ideal']:.2f})" if b else "—"
            t = targets.get((n, p))
            print(f"| {n} | {r['density']:.4f} | {'fwd' if p == 'fwd' else 'fwd+bwd'} | {r['dense_ms']:.2f} | "
                  f"{r['sparse_ms']:.3f} | {r['speedup_vs_dense']:.1f}× | {r['ideal_speedup']:.1f}× | "
                  f"**{r['fraction_of_ideal']:.2f}** | {'≥ %.2f' % t if t else '—'} | "
                  f"{r['sparse_gflops_per_s']:.1f} ({r['sgemm_gflops_per_s']:.0f}) | {before} |")


def model_table():
    print("| model | pass | amp | dense images/s | Fibottention images/s | Fibottention / dense | PyTorch eager dense images/s | our dense / eager | dense peak | sparse peak |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in ("vit_nano_patch2_28", "vit_tiny_patch2_28", "vit_nano_patch4_28"):
        for p in ("train", "infer"):
            eager = load(f"eager_{m}_{p}.json")
            for amp in ("none", "bf16", "none_before"):
                r = load(f"model_{m}_{p}_{amp}.json")
                if not r:
                    continue
                d, s = r["dense"], r["sparse"]
                e = eager["images_per_second"] if eager and amp == "none" else None
                label = "none, before (06d3c66)" if amp == "none_before" else amp
                print(f"| {m} | {'training step' if p == 'train' else 'inference'} | {label} | "
                      f"{d['images_per_second']:.1f} | {s['images_per_second']:.1f} | **{r['speedup_vs_dense']:.2f}×** | "
                      f"{'%.1f' % e if e else '—'} | {'**%.2f×**' % (d['images_per_second'] / e) if e else '—'} | "
                      f"{d['peak_extra_bytes'] / 2**20:.0f} MiB | {s['peak_extra_bytes'] / 2**20:.0f} MiB |")
    r = load("model_vit_tiny_448_p8_infer_none.json")
    if r:
        d, s = r["dense"], r["sparse"]
        print(f"| vit_tiny 448² patch 8 (N = {r['tokens']}), batch {r['batch']} | inference | none | "
              f"{d['images_per_second']:.2f} | {s['images_per_second']:.2f} | **{r['speedup_vs_dense']:.2f}×** | — | — | "
              f"{d['peak_extra_bytes'] / 2**20:.0f} MiB | {s['peak_extra_bytes'] / 2**20:.0f} MiB |")


def breakdown_table():
    parts = ["linear_gemm", "attention", "layout_copies", "gelu", "layer_norm", "elementwise", "optimizer",
             "patch_embedding", "loss", "autograd_engine", "other", "outside_ops"]
    cols = []
    for m in ("vit_nano_patch2_28", "vit_tiny_patch2_28"):
        for amp, tag in (("none_before", " before"), ("none", ""), ("bf16", " bf16")):
            r = load(f"model_{m}_train_{amp}.json")
            if r:
                for k in ("dense", "sparse"):
                    cols.append((f"{m.split('_')[1]} {k}{tag}", r[k]))
    print("| part (ms per step, share) | " + " | ".join(c[0] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for part in parts:
        cells = []
        for _, t in cols:
            ms = t["parts_ms"].get(part, 0.0)
            cells.append(f"{ms:.0f} ({100 * ms / t['profiled_step_ms']:.0f}%)")
        print(f"| {part} | " + " | ".join(cells) + " |")
    print("| **step (profiled)** | " + " | ".join(f"**{t['profiled_step_ms']:.0f}**" for _, t in cols) + " |")


def finetune_table():
    rows = [("dense", "nano_p2_dense"), ("Fibottention", "nano_p2_fibottention")]
    print("| binary | dense images/s | Fibottention images/s | ratio |")
    print("|---|---|---|---|")
    for label, suffix in (("this commit", ""), ("before (main at 06d3c66)", "_before")):
        d, f = (metrics_ips(f"finetune_{r[1]}{suffix}") for r in rows)
        if d and f:
            print(f"| {label} | {d:.1f} | {f:.1f} | {f / d:.2f}× |")


for title, fn in (("operator", operator_table), ("models", model_table), ("breakdown", breakdown_table),
                  ("finetune", finetune_table)):
    print(f"\n### {title}\n")
    fn()
