#!/usr/bin/env python3
"""Summarises scripts/video-demo's runs: per attention, top-1 per seed, mean and spread,
attention GFLOPs per clip (spatial + temporal) and pruning ratio. Writes report.md and
report.json next to the runs. Standard library only."""
import statistics
import sys

from demo_report import read_runs, write_report

ATTENTIONS = ["dense", "fibottention", "bigbird"]


def main(out, model):
    rows, table = [], {}
    for name in ATTENTIONS:
        runs = read_runs(out, name, (0, 1))
        if not runs:
            continue
        accs = [r["test_acc1"] for r in runs]
        entry = {
            "runs": runs,
            "top1_mean": statistics.mean(accs),
            "top1_spread": (max(accs) - min(accs)) / 2 if len(accs) > 1 else 0.0,
            "attention_gflops": runs[0]["attention_gflops"],
            "spatial_gflops": runs[0]["spatial_gflops"],
            "temporal_gflops": runs[0]["temporal_gflops"],
            "pruning_ratio": runs[0]["pruning_ratio"],
        }
        table[name] = entry
        rows.append(
            f"| {name} | {' / '.join(f'{a:.2f}' for a in accs)} | {entry['top1_mean']:.2f} ± {entry['top1_spread']:.2f} "
            f"| {entry['spatial_gflops'] * 1e3:.3f} | {entry['temporal_gflops'] * 1e3:.3f} "
            f"| {entry['attention_gflops'] * 1e3:.3f} | {entry['pruning_ratio']:.4f} |")
    md = [f"# video-demo: {model} on moving_fashion_mnist", "",
          "Spatial attention varied, temporal attention dense; top-1 on the test clips (centre view).", "",
          "| spatial attention | top-1 % (seed 0 / 1) | mean ± half-range | spatial MFLOPs/clip | temporal MFLOPs/clip "
          "| attention MFLOPs/clip | pruning ratio |",
          "|---|---|---|---|---|---|---|"] + rows
    write_report(out, md, {"model": model, "attentions": table})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
