#!/usr/bin/env python3
"""Speed of the CUDA operator on the device (scripts/device-check, stage "benchmarks").

torch.ops.sparsevit.sparse_attention(q, k, v, row_ptr, col_idx, scale) on q, k, v [B, H, N, D]
(H 12, D 64) with the project's Fibottention (configs/attention/vit_fibottention.yaml, w_max = N // 3,
layer 0; precomputed in fibottention_patterns.json), beside SDPA dense, SDPA with the same pattern as
a boolean mask, and compiled FlexAttention with it as a BlockMask of block 128 (every call proven to
have run the compiled graph; compiles under a time guard). Sizes in order: N = 1025 / B 16 and
3137 / B 8, then 197 / B 64, then the `class_token: none` pattern at 1025 and 3137. For each: fp32
and bf16, forward (no autograd) and forward+backward (torch.autograd.grad), and for each pass:
  - events_ms: 20 back-to-back calls between one pair of CUDA events, divided by 20;
  - profiler: the GPU kernels of 5 calls under torch.profiler, per call (name, ms, launches);
  - the memory floor: bytes a pass must move (forward: q, k, v read, out and the fp32 lse written,
    once; the backward's tensors once: q, k, v, out, dO, lse read, dq, dk, dv written) over
    events_ms, in GB/s and as a fraction of a device-to-device copy measured in the same run.
Each record goes to benchmarks.jsonl as it is made, labelled with --label (the correctness status),
so a stage cut by its time limit keeps what it measured."""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compiled_flex import CompiledFlex  # noqa: E402

SCRIPT = "attention_bench.py"
H, D = 12, 64
DEFAULT_SIZES = "1025x16:global,3137x8:global,197x64:global,1025x16:none,3137x8:none"


def parse_sizes(text):
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            nb, _, ct = item.partition(":")
            n, b = (int(x) for x in nb.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: expected NxB[:global|none], e.g. 1025x16:global")
        ct = ct or "global"
        if ct not in ("global", "none"):
            raise argparse.ArgumentTypeError(f"{item!r}: the class token is global or none")
        out.append((n, b, ct))
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Forward and forward+backward times of sparsevit's CUDA op vs SDPA "
                                             "and FlexAttention (needs a GPU).")
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES),
                    help=f"NxB:class_token items, in order (default {DEFAULT_SIZES})")
    ap.add_argument("--dtypes", default="bf16,fp32", help="bf16, fp32 or both (default bf16,fp32)")
    ap.add_argument("--methods", default="sparsevit,sdpa_dense,sdpa_bool_mask,flex_block128")
    ap.add_argument("--iters", type=int, default=20, help="back-to-back calls between one pair of events")
    ap.add_argument("--profile-iters", type=int, default=5, help="calls under torch.profiler")
    ap.add_argument("--flex-guard-s", type=float, default=90.0, help="time limit of one FlexAttention compile")
    ap.add_argument("--flex-budget-s", type=float, default=150.0, help="all FlexAttention work together")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="epoch seconds at which the stage's time ends; no new size starts within 10 s of it")
    ap.add_argument("--label", default="correctness=unknown", help="carried in every record")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for benchmarks.jsonl")
    args = ap.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    bad = [d for d in args.dtypes if d not in ("bf16", "fp32")]
    if bad:
        ap.error(f"--dtypes: unknown {bad} (bf16, fp32)")
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    return args


class GuardTimeout(Exception):
    pass


def guarded(seconds, fn):
    """fn() under SIGALRM: GuardTimeout after `seconds`."""
    def on_alarm(signum, frame):
        raise GuardTimeout(f"over its {seconds:.0f} s guard")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.nn.functional as F
    import device_common as dc
    dc.require_cuda(SCRIPT)
    ops = dc.load_ops(SCRIPT)
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    rec = dc.Records(os.path.join(args.out, "benchmarks.jsonl"), label=args.label)

    def events_ms(fn, iters):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / iters

    def kernels_per_call(fn, iters):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
        per = {}
        for e in prof.events():
            if e.device_type != DeviceType.CUDA:
                continue
            t, c = per.get(e.name, (0.0, 0))
            per[e.name] = (t + e.time_range.elapsed_us(), c + 1)
        rows = sorted(((n, t / iters / 1e3, c / iters) for n, (t, c) in per.items()), key=lambda r: -r[1])
        return sum(r[1] for r in rows), [{"name": n[:120], "ms": ms, "launches": c} for n, ms, c in rows[:6]]

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    copy_gbs = 2 * src.numel() / (events_ms(lambda: dst.copy_(src), 10) * 1e-3) / 1e9
    del src, dst
    rec.add(bench="copy_bandwidth", gb_per_s=copy_gbs, device=torch.cuda.get_device_name(), torch=torch.__version__)

    flex_attention = create_block_mask = None
    flex_note = None
    if any(m.startswith("flex") for m in args.methods):
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except Exception as e:  # noqa: BLE001
            flex_note = f"flex_attention unavailable: {str(e)[:200]}"
    flex_spent = 0.0
    t_start = time.time()

    for N, B, class_token in args.sizes:
        if args.deadline and time.time() > args.deadline - 10:
            rec.add(bench="stopped", reason="the stage's time is nearly spent", next_size=[N, B, class_token])
            break
        kind = "fibottention" if class_token == "global" else "fibottention_none"
        try:
            rp, ci = dc.pattern(kind, N, H)
        except KeyError as e:
            rec.add(bench="attention", N=N, B=B, class_token=class_token, error=str(e)[:300])
            continue
        mask = dc.dense_mask(rp, ci, N, "cuda")
        kept = int(rp[:, -1].sum())
        density = kept / (H * N * N)
        scale = dc.default_scale(D)
        block_mask = None
        if "flex_block128" in args.methods and flex_attention is not None:
            t0 = time.perf_counter()
            try:
                block_mask = create_block_mask(lambda b, h, qi, ki: mask[h, qi, ki], None, H, N, N, device="cuda",
                                               BLOCK_SIZE=128)
                nb = -(-N // 128)
                blocks = int(block_mask.kv_num_blocks.sum()) + (int(block_mask.full_kv_num_blocks.sum())
                                                                if block_mask.full_kv_num_blocks is not None else 0)
                rec.add(bench="flex_block_mask", N=N, class_token=class_token, block_size=128,
                        build_s=time.perf_counter() - t0, blocks_computed=blocks, blocks_total=H * nb * nb)
            except Exception as e:  # noqa: BLE001
                rec.add(bench="flex_block_mask", N=N, class_token=class_token, error=str(e)[:300])
        for dtype_name in args.dtypes:
            dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
            elem = 2 if dtype_name == "bf16" else 4
            gen = torch.Generator(device="cuda").manual_seed(0)
            q, k, v, dout = (torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=gen) for _ in range(4))
            qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
            bhnd, bhn = B * H * N * D, B * H * N
            fwd_bytes = 4 * bhnd * elem + bhn * 4
            floors = {"forward": fwd_bytes, "forward_backward": fwd_bytes + 8 * bhnd * elem + bhn * 4}
            common = dict(N=N, B=B, H=H, D=D, dtype=dtype_name, class_token=class_token, density=density,
                          kept_pairs_per_batch_item=kept)
            methods = {
                "sparsevit": lambda a, b, c: ops.sparse_attention(a, b, c, rp, ci, scale),
                "sdpa_dense": lambda a, b, c: F.scaled_dot_product_attention(a, b, c, scale=scale),
                "sdpa_bool_mask": lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask, scale=scale),
            }
            for name in args.methods:
                if name not in methods and name != "flex_block128":
                    rec.add(bench="attention", method=name, error="unknown method", **common)
                    continue
                for pass_name in ("forward", "forward_backward"):
                    entry = dict(bench="attention", method=name, **{"pass": pass_name}, **common,
                                 floor_bytes=floors[pass_name])
                    proof = None
                    try:
                        if name == "flex_block128":
                            if flex_note or block_mask is None:
                                rec.add(**entry, skipped=flex_note or "no block mask")
                                continue
                            left = args.flex_budget_s - flex_spent
                            if args.deadline:
                                left = min(left, args.deadline - 10 - time.time())
                            if left < 5:
                                rec.add(**entry, skipped=f"FlexAttention time budget spent ({flex_spent:.0f} s used)")
                                continue
                            cf = CompiledFlex(torch, flex_attention)
                            fn3 = lambda a, b, c, cf=cf: cf(a, b, c, block_mask=block_mask, scale=scale)  # noqa: E731
                        else:
                            fn3 = methods[name]
                        if pass_name == "forward":
                            def call(fn3=fn3):
                                with torch.no_grad():
                                    return fn3(q, k, v)
                        else:
                            def call(fn3=fn3):
                                out = fn3(qg, kg, vg)
                                return torch.autograd.grad(out, (qg, kg, vg), dout)
                        t0 = time.perf_counter()
                        if name == "flex_block128":
                            try:
                                guarded(min(args.flex_guard_s, left), lambda: (call(), torch.cuda.synchronize()))
                            finally:
                                flex_spent += time.perf_counter() - t0
                            entry["first_call_s"] = time.perf_counter() - t0
                        for _ in range(3):
                            call()
                        torch.cuda.synchronize()
                        kernel_ms, kernels = kernels_per_call(call, args.profile_iters)
                        ms = events_ms(call, args.iters)
                        if name == "flex_block128":
                            flex_spent += time.perf_counter() - t0 - entry["first_call_s"]
                            proof = cf.proof()
                        gbs = floors[pass_name] / (ms * 1e-3) / 1e9
                        rec.add(**entry, events_ms=ms, events_calls=args.iters, profiler_kernel_ms=kernel_ms,
                                profiler_calls=args.profile_iters, kernels=kernels, floor_gb_per_s=gbs,
                                floor_fraction_of_copy=gbs / copy_gbs, compiled_proof=proof)
                        if proof is not None and not proof["every_call_ran_the_compiled_graph"]:
                            rec.add(**entry, error="FlexAttention ran uncompiled: its times are not FlexAttention's")
                    except GuardTimeout as e:
                        rec.add(**entry, skipped=f"FlexAttention compile {e}; FlexAttention off from here")
                        flex_note = "an earlier FlexAttention compile ran over its guard"
                        torch._dynamo.reset()
                    except Exception as e:  # noqa: BLE001 - one method failing must not hide the others
                        rec.add(**entry, error=f"{type(e).__name__}: {str(e)[:400]}")
                        if name == "flex_block128":
                            torch._dynamo.reset()
            del q, k, v, dout, qg, kg, vg
            torch.cuda.empty_cache()
        del mask, block_mask
        torch.cuda.empty_cache()
    rec.add(bench="done", seconds=time.time() - t_start, flex_seconds=flex_spent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
