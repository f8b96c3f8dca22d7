#!/usr/bin/env python3
"""Stand-in for the device stages in scripts/device-check's dry run (DEVICE_CHECK_DRY_RUN=1): takes
--seconds (spread over its records, so a stage cut by its limit leaves part of its output, as a real
one would) and writes the files the real stage writes, in the same record format, every record
marked "dry_run": true. No number it writes was measured; the summary says so. Standard library only.

  dry_run_stub.py {env,build-ops,build-core,correctness,benchmarks,vit-step,memcheck} --out DIR
                  [--seconds S] [--rc RC] [--build DIR]"""
import argparse
import json
import os
import sys
import time

STAGES = ("env", "build-ops", "build-core", "correctness", "benchmarks", "vit-step", "memcheck")


def records(stage, label):
    """(file name, [records]) a real run of `stage` would write."""
    if stage == "correctness":
        recs = []
        for n, kind in ((197, "fibottention"), (197, "fibottention_none"), (1025, "fibottention"),
                        (197, "random"), (57, "random")):
            tag = dict(B=2, H=12, N=n, D=64, pattern=kind)
            for check in ("fp32_vs_float64", "bitwise_rerun", "cuda_vs_cpu_fp32", "nan_padded_strided",
                          "packed_equals_unpacked", "bf16_within_sdpa_error"):
                recs.append(dict(check=check, ok=True, **tag))
        recs.append(dict(summary="correctness", failures=[], passed=True))
        return "correctness.jsonl", recs
    if stage == "benchmarks":
        recs = [dict(bench="copy_bandwidth", gb_per_s=4000.0, device="DRY RUN (no GPU)", torch="dry")]
        fake = {"sparsevit": 1.0, "sdpa_dense": 3.0, "sdpa_bool_mask": 9.0, "flex_block128": 2.5}
        for n, b, ct in ((1025, 16, "global"), (3137, 8, "global"), (197, 64, "global"), (1025, 16, "none"),
                         (3137, 8, "none")):
            for dtype, elem in (("bf16", 2), ("fp32", 4)):
                for method, f in fake.items():
                    for pass_name, mult in (("forward", 1.0), ("forward_backward", 3.0)):
                        bhnd, bhn = b * 12 * n * 64, b * 12 * n
                        floor = 4 * bhnd * elem + bhn * 4 + (8 * bhnd * elem + bhn * 4 if mult > 1 else 0)
                        ms = f * mult * n * b / 16000.0 * elem / 2
                        recs.append(dict(label=label, bench="attention", method=method, **{"pass": pass_name}, N=n,
                                         B=b, H=12, D=64, dtype=dtype, class_token=ct, density=0.01, floor_bytes=floor,
                                         events_ms=ms, events_calls=20, profiler_kernel_ms=ms * 0.95,
                                         profiler_calls=5, kernels=[{"name": "dry_kernel", "ms": ms * 0.95,
                                                                     "launches": 1}],
                                         floor_gb_per_s=floor / (ms * 1e-3) / 1e9,
                                         floor_fraction_of_copy=floor / (ms * 1e-3) / 1e9 / 4000.0,
                                         compiled_proof={"every_call_ran_the_compiled_graph": True}
                                         if method.startswith("flex") else None))
        recs.append(dict(label=label, bench="done", seconds=0.0, flex_seconds=0.0))
        return "benchmarks.jsonl", recs
    if stage == "vit-step":
        return "vit_step.jsonl", [dict(label=label, bench="vit_step", model="dense", batch=64, step_ms=300.0),
                                  dict(label=label, bench="vit_step", model="sparsevit_fibottention", batch=64,
                                       step_ms=250.0)]
    if stage == "memcheck":
        return "memcheck_ops.jsonl", [dict(case="sparse_attention+qkv fwd/bwd", finite=True, N=197, pattern=p)
                                      for p in ("fibottention", "fibottention_none", "random")] + \
            [dict(summary="memcheck_ops", failures=0)]
    return None, [dict(stage=stage, line=i) for i in range(5)]


def main():
    ap = argparse.ArgumentParser(description="A device stage's stand-in for the dry run (no GPU).")
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rc", type=int, default=0)
    ap.add_argument("--build", help="build-ops / build-core: the build folder to put the library in")
    ap.add_argument("--no-library", action="store_true", help="build-ops: leave libsparsevit_ops.so out")
    ap.add_argument("--label", default="correctness=unknown")
    args = ap.parse_args()
    name, recs = records(args.stage, args.label)
    path = os.path.join(args.out, name) if name else None
    f = open(path, "a") if path else None
    step = args.seconds / max(len(recs), 1)
    for r in recs:
        line = json.dumps({**r, "dry_run": True})
        if f:
            f.write(line + "\n")
            f.flush()
        print(line if f is None else f"dry-run {args.stage}: {line[:100]}", flush=True)
        time.sleep(step)
    if args.stage == "memcheck":
        print("========= COMPUTE-SANITIZER (dry run stand-in)\n========= ERROR SUMMARY: 0 errors", flush=True)
    if args.stage == "env":
        with open(os.path.join(args.out, "env.txt"), "w") as g:
            g.write("device: DRY RUN (no GPU)\ntorch: dry run stand-in\npython: " + sys.version.split()[0] + "\n")
    if args.build and args.stage in ("build-ops", "build-core"):
        os.makedirs(args.build, exist_ok=True)
        lib = "libsparsevit_ops.so" if args.stage == "build-ops" else "_sparsevit_core.dry.so"
        if not (args.stage == "build-ops" and args.no_library):
            with open(os.path.join(args.build, lib), "w") as g:
                g.write("dry run stand-in\n")
        if args.stage == "build-ops":
            os.makedirs(os.path.join(args.out, "ptxas"), exist_ok=True)
            with open(os.path.join(args.out, "ptxas", "sparse_attention.cu.o.ptxas.txt"), "w") as g:
                g.write("ptxas info    : Used 64 registers, 0 bytes spill stores, 0 bytes spill loads (dry run)\n")
    return args.rc


if __name__ == "__main__":
    sys.exit(main())
