#!/usr/bin/env python3
"""summary.txt of scripts/device-check from its results folder (stages.txt, env.txt and the stages'
JSON lines); standard library only, so it runs with any python3, dry run included. Prints to stdout.

  summarize.py RESULTS_DIR [--deadline S] [--elapsed S] [--dry-run] [--final]"""
import argparse
import json
import os
import re

METHODS = ("sparsevit", "flex_block128", "sdpa_dense", "sdpa_bool_mask")


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def read_stages(path):
    stages = []
    try:
        with open(path) as f:
            for line in f:
                d = dict(re.findall(r"(\w+)=(\S+)", line.split(" note=")[0]))
                if " note=" in line:
                    d["note"] = line.split(" note=", 1)[1].strip()
                if "stage" in d:
                    stages.append(d)
    except OSError:
        pass
    return stages


def fmt(x, spec="{:.3f}"):
    return "-" if x is None else spec.format(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--deadline", type=float, default=0)
    ap.add_argument("--elapsed", type=float, default=0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--final", action="store_true", help="the run has ended (else: a stage is next)")
    args = ap.parse_args()
    r = args.results
    lines = []
    add = lines.append
    if args.dry_run:
        add("DRY RUN: every device stage was a stand-in (bench/device/dry_run_stub.py); no number below was "
            "measured on a GPU.")
    add(f"sparsevit device check: {'finished' if args.final else 'in progress'}, {args.elapsed:.0f} s of the "
        f"{args.deadline:.0f} s deadline")
    try:
        with open(os.path.join(r, "env.txt")) as f:
            env = f.read()
        for key in ("device", "torch", "nvcc", "commit", "python_headers", "compute_sanitizer"):
            m = re.search(rf"^{key}: (.*)$", env, re.M)
            if m:
                add(f"  {key}: {m.group(1).strip()[:150]}")
    except OSError:
        add("  env: not recorded")

    add("stages (status, seconds / limit):")
    for s in read_stages(os.path.join(r, "stages.txt")):
        note = f"  {s['note']}" if s.get("note") else ""
        add(f"  {s['stage']:<12} {s.get('status', '?'):<8} rc={s.get('rc', '-'):<4} {s.get('seconds', '-'):>6} s / "
            f"{s.get('limit', '-'):>5} s{note}")

    corr = read_jsonl(os.path.join(r, "correctness.jsonl"))
    summ = [c for c in corr if c.get("summary") == "correctness"]
    checks = [c for c in corr if "check" in c]
    if summ:
        s = summ[-1]
        status = "passed" if s.get("passed") else "FAILED: " + "; ".join(s.get("failures", []))[:400]
        add(f"correctness: {status} ({len(checks)} checks)")
    elif checks:
        bad = [c for c in checks if not c.get("ok")]
        add(f"correctness: incomplete ({len(checks)} checks recorded, {len(bad)} failed)")
    else:
        add("correctness: not run")
    for c in [c for c in checks if not c.get("ok")][:8]:
        add(f"  failed {c.get('check')} {c.get('pattern', '')} N={c.get('N', '')} "
            f"{json.dumps(c.get('errors', c.get('error', '')))[:160]}")

    bench = read_jsonl(os.path.join(r, "benchmarks.jsonl"))
    att = [b for b in bench if b.get("bench") == "attention"]
    if not bench:
        add("benchmarks: not run")
    else:
        label = next((b.get("label") for b in bench if b.get("label")), "?")
        copy = next((b for b in bench if b.get("bench") == "copy_bandwidth"), {})
        add(f"benchmarks ({label}; copy bandwidth {fmt(copy.get('gb_per_s'), '{:.0f}')} GB/s on "
            f"{copy.get('device', '?')}):")
        add("  ms = 20 back-to-back calls / 20 (CUDA events); kernel = GPU kernel time per call (torch.profiler); "
            "GB/s = memory floor / ms")
        add(f"  {'N':>5} {'B':>3} {'cls':<6} {'dtype':<5} {'pass':<8} {'method':<15} {'ms':>9} {'kernel':>9} "
            f"{'GB/s':>7} {'%copy':>6}  vs ours")
        groups = {}
        for b in att:
            key = (b.get("N"), b.get("B"), b.get("class_token"), b.get("dtype"), b.get("pass"))
            groups.setdefault(key, {})[b.get("method")] = b
        for key, by_method in groups.items():
            ours = by_method.get("sparsevit", {}).get("events_ms")
            for m in METHODS + tuple(x for x in by_method if x not in METHODS):
                b = by_method.get(m)
                if b is None:
                    continue
                n, bb, ct, dt, ps = key
                ps = "fwd" if ps == "forward" else "fwd+bwd"
                if "events_ms" not in b:
                    why = b.get("error") or b.get("skipped") or "?"
                    add(f"  {n:>5} {bb:>3} {ct:<6} {dt:<5} {ps:<8} {m:<15} {'—':>9} {why[:70]}")
                    continue
                ratio = "" if m == "sparsevit" or not ours else f"{b['events_ms'] / ours:.2f}x"
                add(f"  {n:>5} {bb:>3} {ct:<6} {dt:<5} {ps:<8} {m:<15} {b['events_ms']:>9.3f} "
                    f"{fmt(b.get('profiler_kernel_ms')):>9} {fmt(b.get('floor_gb_per_s'), '{:.0f}'):>7} "
                    f"{fmt(100 * b['floor_fraction_of_copy'] if b.get('floor_fraction_of_copy') else None, '{:.1f}'):>6}"
                    f"  {ratio}")
        stopped = [b for b in bench if b.get("bench") == "stopped"]
        if stopped:
            add(f"  stopped early: {stopped[-1].get('reason')} (next: {stopped[-1].get('next_size')})")
        if not any(b.get("bench") == "done" for b in bench) and not stopped:
            add("  (the benchmark stage ended before it finished: the rows above are what it measured)")

    vit = read_jsonl(os.path.join(r, "vit_step.jsonl"))
    if not vit:
        add("vit-step: not run")
    for v in vit:
        if "step_ms" in v:
            add(f"vit-step: {v.get('model')} batch {v.get('batch')}: {v['step_ms']:.1f} ms/step")
        else:
            add(f"vit-step: {v.get('model', '')} {v.get('skipped') or v.get('error')}"[:200])

    try:
        with open(os.path.join(r, "memcheck.log"), errors="replace") as f:
            text = f.read()
        m = re.findall(r"ERROR SUMMARY: (\d+) error", text)
        add(f"memcheck: {'ERROR SUMMARY: ' + m[-1] + ' errors' if m else 'no ERROR SUMMARY line (see memcheck.log)'}")
    except OSError:
        add("memcheck: not run")
    add("files: $OUT/device-check.tar.gz (results/: env.txt, stages.txt, *.log, *.jsonl, ptxas/), "
        "$OUT/stages.txt, $OUT/summary.txt")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
