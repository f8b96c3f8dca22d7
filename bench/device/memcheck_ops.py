#!/usr/bin/env python3
"""The operator alone, small, for compute-sanitizer (scripts/device-check, stage "memcheck", run with
PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that every tensor is its own cudaMalloc and an out-of-bounds
access is not hidden inside the caching allocator's blocks): sparse_attention forward and backward,
fp32 and bf16, D 64 and 40, on the project's Fibottention at N = 197 (class token global and none),
a Fibottention-like union with offset 0 and random rows (some empty), plus the packed qkv form.
Loads only libsparsevit_ops.so. Exit 0 when every call returned finite values, 1 otherwise, 2
without CUDA."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SCRIPT = "memcheck_ops.py"


def main(argv=None):
    ap = argparse.ArgumentParser(description="Small sparse_attention calls for compute-sanitizer (needs a GPU).")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for memcheck_ops.jsonl")
    args = ap.parse_args(argv)
    import torch
    import device_common as dc
    dc.require_cuda(SCRIPT)
    ops = dc.load_ops(SCRIPT)
    rec = dc.Records(os.path.join(args.out, "memcheck_ops.jsonl"),
                     caching_allocator_off=os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1")
    bad = 0
    cases = [(1, 12, 197, 64, "fibottention"), (1, 12, 197, 64, "fibottention_none"),
             (2, 4, 29, 64, "fibottention_like"), (2, 4, 29, 64, "random"), (1, 3, 57, 40, "random")]
    for B, H, N, D, kind in cases:
        rp, ci = dc.pattern(kind, N, H)
        for dtype in (torch.float32, torch.bfloat16):
            tag = dict(B=B, H=H, N=N, D=D, pattern=kind, dtype=str(dtype).split(".")[-1])
            try:
                q, k, v, g = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(4))
                qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
                out = ops.sparse_attention(qg, kg, vg, rp, ci, dc.default_scale(D))
                grads = torch.autograd.grad(out, (qg, kg, vg), g)
                qkv = torch.randn(B, N, 3 * H * D, device="cuda", dtype=dtype, requires_grad=True)
                out_p = ops.sparse_attention_qkv(qkv, H, rp, ci, dc.default_scale(D))
                (dqkv,) = torch.autograd.grad(out_p, (qkv,), torch.randn_like(out_p))
                torch.cuda.synchronize()
                finite = all(bool(torch.isfinite(t).all()) for t in (out, *grads, out_p, dqkv))
                rec.add(case="sparse_attention+qkv fwd/bwd", finite=finite, **tag)
                bad += not finite
            except Exception as e:  # noqa: BLE001
                rec.add(case="sparse_attention+qkv fwd/bwd", error=f"{type(e).__name__}: {str(e)[:300]}", **tag)
                bad += 1
    rec.add(summary="memcheck_ops", failures=bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
