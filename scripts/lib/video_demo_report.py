#!/usr/bin/env python3
"""Writes scripts/video-demo's report.md / report.json from its sweeps' report.json files: the
image ViT the TimeSformers started from, the motion-blind floor (the same TimeSformer shown one
frame), the sweep's table (mean, 95% Student-t interval over seeds, paired difference to dense),
and every pair of rows with its paired difference and whether the interval separates it from 0.
Standard library only.

usage: video_demo_report.py OUT  (OUT holds image_vit/, sweep/report.json, floor/report.json)
"""
import json
import math
import os
import statistics
import sys

# Student-t 0.975 quantiles by degrees of freedom (as the sweep's intervals use).
T975 = {1: 12.7062047, 2: 4.30265273, 3: 3.18244631, 4: 2.77644511, 5: 2.57058184, 6: 2.44691185,
        7: 2.36462425, 8: 2.30600414, 9: 2.26215716}


def paired(a, b):
    """Mean and 95% t interval of the per-seed differences a - b (same seeds, same order)."""
    d = [x - y for x, y in zip(a, b)]
    mean = statistics.mean(d)
    if len(d) < 2:
        return mean, None
    half = T975.get(len(d) - 1, 1.96) * statistics.stdev(d) / math.sqrt(len(d))
    return mean, [mean - half, mean + half]


def load(path):
    with open(path) as f:
        return json.load(f)


def main(out):
    sweep = load(os.path.join(out, "sweep", "report.json"))
    floor_path = os.path.join(out, "floor", "report.json")
    floor = load(floor_path) if os.path.exists(floor_path) else None
    image = load(os.path.join(out, "image_vit", "summary.json"))
    with open(os.path.join(out, "image_vit", "source.txt")) as f:
        image_source = f.read().strip()
    with open(os.path.join(out, "sweep", "report.md")) as f:
        sweep_md = f.read().split("\n", 1)[1].strip()  # without its title

    rows = sweep["rows"]
    pairs = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            mean, ci = paired(b["test_acc1"], a["test_acc1"])
            pairs.append({"a": b["method"], "b": a["method"], "mean": mean, "ci": ci,
                          "separates": ci is not None and (ci[0] > 0 or ci[1] < 0)})
    best = max(rows, key=lambda r: r["test_acc1_mean"])
    floor_row = floor["rows"][0] if floor else None

    md = ["# video-demo: TimeSformer from an image ViT, dense vs Fibottention vs BigBird spatial attention", "",
          f"- **Image ViT** (the TimeSformers' spatial weights, as TimeSformer starts from ImageNet ViT-B): {image_source}; "
          f"top-1 {image['test_acc1']:.2f}% on fashion_mnist_frames test (10 000 images).",
          f"- **Best row**: {best['method']} {best['test_acc1_mean']:.2f}% mean top-1 over seeds "
          f"{', '.join(str(s) for s in best['seeds'])} (95% interval [{best['test_acc1_ci'][0]:.2f}, "
          f"{best['test_acc1_ci'][1]:.2f}])." if best.get("test_acc1_ci") else
          f"- **Best row**: {best['method']} {best['test_acc1_mean']:.2f}% mean top-1."]
    if floor_row:
        ci = floor_row.get("test_acc1_ci")
        md.append(f"- **Motion-blind floor** (the same TimeSformer and image init shown one frame, dense): "
                  f"{floor_row['test_acc1_mean']:.2f}% (seeds {', '.join(f'{a:.2f}' for a in floor_row['test_acc1'])}"
                  + (f"; 95% interval [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + "). A model that cannot see "
                  "motion can reach at most ~50% here (two garments, one moves), chance is 10%.")
    md += ["", "## Which differences separate (paired by seed, 95% t interval of the difference)", "",
           "| row | minus | mean difference (points) | 95% interval | separates from 0 |", "|---|---|---|---|---|"]
    for p in pairs:
        ci = f"[{p['ci'][0]:+.2f}, {p['ci'][1]:+.2f}]" if p["ci"] else "(one seed)"
        md.append(f"| {p['a']} | {p['b']} | {p['mean']:+.2f} | {ci} | {'**yes**' if p['separates'] else 'no'} |")
    md += ["", "## The sweep's report", "", sweep_md, ""]
    if floor:
        with open(os.path.join(out, "floor", "report.md")) as f:
            md += ["## The floor's sweep (one frame)", "", f.read().split("\n", 1)[1].strip(), ""]
    report = {"image_vit": {"source": image_source, "test_acc1": image["test_acc1"]},
              "best": {"method": best["method"], "test_acc1_mean": best["test_acc1_mean"],
                       "test_acc1_ci": best.get("test_acc1_ci")},
              "floor": floor_row and {"test_acc1": floor_row["test_acc1"], "test_acc1_mean": floor_row["test_acc1_mean"],
                                      "test_acc1_ci": floor_row.get("test_acc1_ci")},
              "pairs": pairs, "rows": rows}
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print("\n".join(md[:8 + len(pairs)]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
