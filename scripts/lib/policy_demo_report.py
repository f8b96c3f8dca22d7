#!/usr/bin/env python3
"""Summarises scripts/policy-demo's runs: per encoder attention, closed-loop PushT success rate
and mean max coverage per seed with their mean and half-range, the encoder's attention GFLOPs per
image and pruning ratio, training loss and time; and the scripted expert on the same episode
seeds. Writes report.md and report.json next to the runs. Standard library only."""
import json
import os
import statistics
import sys

from demo_report import read_runs, write_report

ATTENTIONS = ["dense", "fibottention"]


def spread(values):
    return (max(values) - min(values)) / 2 if len(values) > 1 else 0.0


def main(out, seeds):
    table, rows = {}, []
    for name in ATTENTIONS:
        runs = read_runs(out, name, seeds)
        if not runs:
            continue
        success = [100 * r["success_rate"] for r in runs]
        coverage = [r["mean_max_coverage"] for r in runs]
        table[name] = {"runs": runs, "success_mean": statistics.mean(success), "success_spread": spread(success),
                       "coverage_mean": statistics.mean(coverage), "coverage_spread": spread(coverage),
                       "encoder_attention_gflops": runs[0]["encoder_attention_gflops"],
                       "pruning_ratio": runs[0]["pruning_ratio"]}
        e = table[name]
        rows.append(f"| {name} | {' / '.join(f'{s:.0f}' for s in success)} | {e['success_mean']:.1f} ± "
                    f"{e['success_spread']:.1f} | {' / '.join(f'{c:.3f}' for c in coverage)} | "
                    f"{e['coverage_mean']:.3f} | {e['encoder_attention_gflops'] * 1e6:.1f} | {e['pruning_ratio']:.4f} | "
                    f"{' / '.join('%.4f' % r['train_loss'] for r in runs)} | "
                    f"{' / '.join('%.1f' % (r['seconds'] / 60) for r in runs)} |")
    expert = None
    path = os.path.join(out, "expert_eval.json")
    if os.path.exists(path):
        with open(path) as f:
            expert = json.load(f)
    md = ["# policy-demo: diffusion policy with a ViT encoder on PushT", "",
          f"Closed loop, {runs[0]['eval_episodes'] if table else 0} episodes from seeds 100000.. per run; "
          f"training seeds {' / '.join(map(str, seeds))}.", "",
          "| encoder attention | success % (per seed) | mean ± half-range | mean max coverage (per seed) | mean "
          "| encoder attention kFLOPs / image | pruning ratio | final train loss | train + eval minutes |",
          "|---|---|---|---|---|---|---|---|---|"] + rows
    if expert:
        md += ["", f"Scripted expert on the same episode seeds: {expert['success_rate'] * 100:.1f}% success "
                   f"({expert['episodes']} episodes)."]
    write_report(out, md, {"attentions": table, "expert": expert})


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]] or [0, 1])
