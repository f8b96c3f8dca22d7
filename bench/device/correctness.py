#!/usr/bin/env python3
"""Correctness of the CUDA operator on the device (scripts/device-check, stage "correctness"):
vs a float64 masked reference (fp32 <= 1e-5 relative, forward and gradients), bf16 within SDPA's
own bf16 error (SDPA with the boolean mask, both against float64), float64 gradcheck at a small N,
NaN-padded strided views passed to the op as they are (asserted non-contiguous), bit-identical
reruns, packed qkv = unpacked, CUDA = CPU. Patterns: the project's Fibottention (class token global
and `none`, precomputed in fibottention_patterns.json), a Fibottention-like union with offset 0,
and random CSR rows (some empty). Exit status 1 when any check fails, 2 without CUDA.
--tiny: the smallest sizes."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_common as dc  # noqa: E402

SCRIPT = "correctness.py"


def grads(fn, q, k, v, g):
    """(out, dq, dk, dv) of fn on contiguous leaf copies."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = fn(q, k, v)
    out.backward(g)
    return out.detach(), q.grad, k.grad, v.grad


def nan_padded_view(t, pad_n=3, pad_d=8):
    """A leaf buffer [B, H, N + pad_n, D + pad_d] full of NaN holding t at [1:N+1, 2:D+2], and that
    view (non-contiguous: its row stride is D + pad_d)."""
    B, H, N, D = t.shape
    buf = torch.full((B, H, N + pad_n, D + pad_d), float("nan"), device=t.device, dtype=t.dtype)
    with torch.no_grad():
        buf[:, :, 1:N + 1, 2:D + 2] = t
    buf.requires_grad_(True)
    return buf, buf[:, :, 1:N + 1, 2:D + 2]


def grads_strided(fn, q, k, v, g):
    """(out, dq, dk, dv) of fn called with NaN-padded strided views of q, k, v and a strided grad_out;
    the views reach the op as they are (never cloned), and their gradients are read back from the
    buffers' .grad (which must hold 0, not NaN, in the padding)."""
    bufs, views = zip(*(nan_padded_view(t) for t in (q, k, v)))
    gbuf = torch.full((g.shape[0], g.shape[1], g.shape[2] + 3, g.shape[3] + 8), float("nan"), device=g.device,
                      dtype=g.dtype)
    gbuf[:, :, 1:g.shape[2] + 1, 2:g.shape[3] + 2] = g
    gview = gbuf[:, :, 1:g.shape[2] + 1, 2:g.shape[3] + 2]
    for name, t in zip(("q", "k", "v", "grad_out"), views + (gview,)):
        assert not t.is_contiguous(), f"the strided {name} became contiguous before the op"
    out = fn(*views)
    out.backward(gview)
    n, d = q.shape[2], q.shape[3]
    grads_ = [b.grad[:, :, 1:n + 1, 2:d + 2] for b in bufs]
    pad_clean = all(bool(torch.isfinite(b.grad).all()) for b in bufs)
    return (out.detach(), *grads_), pad_clean


def main():
    ap = argparse.ArgumentParser(description="Correctness of torch.ops.sparsevit on a CUDA device.")
    ap.add_argument("--tiny", action="store_true", help="the smallest sizes only")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for correctness.jsonl")
    args = ap.parse_args()
    dc.require_cuda(SCRIPT)
    ops = dc.load_ops(SCRIPT)
    rec = dc.Records(os.path.join(args.out, "correctness-tiny.jsonl" if args.tiny else "correctness.jsonl"))
    dev = torch.device("cuda")
    failures = []

    def check(name, ok, **info):
        rec.add(check=name, ok=bool(ok), **info)
        if not ok:
            failures.append(f"{name} {info.get('pattern', '')} N={info.get('N', '')}")

    if args.tiny:
        sizes = [(2, 4, 29, 64, "fibottention_like"), (2, 4, 29, 64, "random")]
    else:
        sizes = [(2, 12, 197, 64, "fibottention"), (2, 12, 197, 64, "fibottention_none"),
                 (1, 12, 1025, 64, "fibottention"), (2, 12, 197, 64, "fibottention_like"),
                 (2, 12, 197, 64, "random"), (1, 4, 300, 128, "fibottention_like"), (1, 4, 300, 128, "random"),
                 (2, 3, 57, 40, "fibottention_like"), (2, 3, 57, 40, "random")]
    for B, H, N, D, kind in sizes:
        scale = dc.default_scale(D)
        tag = dict(B=B, H=H, N=N, D=D, pattern=kind)
        try:
            rp, ci = dc.pattern(kind, N, H)
            mask = dc.dense_mask(rp, ci, N, dev)
            gen = torch.Generator(device=dev).manual_seed(1)
            q, k, v, g = (torch.randn(B, H, N, D, device=dev, generator=gen) for _ in range(4))

            def op(a, b, c):
                return ops.sparse_attention(a, b, c, rp, ci, scale)

            # fp32 vs float64 (forward and gradients)
            ref = grads(lambda a, b, c: dc.masked_reference(a, b, c, mask, scale), q.double(), k.double(),
                        v.double(), g.double())
            got = grads(op, q, k, v, g)
            errs = [dc.rel_err(x, y) for x, y in zip(got, ref)]
            check("fp32_vs_float64", max(errs) <= 1e-5, errors=dict(zip(("out", "dq", "dk", "dv"), errs)), **tag)
            # bitwise reruns
            again = grads(op, q, k, v, g)
            check("bitwise_rerun", all(torch.equal(x, y) for x, y in zip(got, again)), **tag)
            # CUDA = CPU (fp32)
            cpu = grads(op, q.cpu(), k.cpu(), v.cpu(), g.cpu())
            cerrs = [dc.rel_err(x.cpu(), y) for x, y in zip(got, cpu)]
            check("cuda_vs_cpu_fp32", max(cerrs) <= 1e-5, errors=cerrs, **tag)
            # NaN-padded strided views, passed to the op as they are: same values as the contiguous run
            pad, pad_clean = grads_strided(op, q, k, v, g)
            perrs = [dc.rel_err(x, y) for x, y in zip(pad, got)]
            check("nan_padded_strided", max(perrs) <= 1e-6 and pad_clean, errors=perrs,
                  bitwise=all(torch.equal(x, y) for x, y in zip(pad, got)), padding_grad_finite=pad_clean, **tag)
            # packed qkv [B, N, 3*H*D] = the unpacked op on its views
            qkv = torch.stack((q, k, v), dim=0).permute(1, 3, 0, 2, 4).reshape(B, N, 3 * H * D).contiguous()
            qkv.requires_grad_(True)
            out_p = ops.sparse_attention_qkv(qkv, H, rp, ci, scale)
            out_p.backward(g.transpose(1, 2).reshape(B, N, H * D))
            qv, kv, vv = qkv.detach().view(B, N, 3, H, D).permute(2, 0, 3, 1, 4)
            un = grads(op, qv, kv, vv, g)
            dqkv = qkv.grad.view(B, N, 3, H, D).permute(2, 0, 3, 1, 4)
            check("packed_equals_unpacked",
                  torch.equal(out_p.detach(), un[0].transpose(1, 2).reshape(B, N, H * D)) and
                  all(torch.equal(dqkv[i], un[i + 1]) for i in range(3)), **tag)
            # bf16 vs SDPA's own bf16 error (both against float64 on the bf16-rounded inputs); SDPA
            # has no answer for rows without keys (NaN), so only patterns without empty rows
            if not bool(mask.any(-1).all()):
                rec.add(check="bf16_within_sdpa_error", skipped="pattern has empty rows", **tag)
                continue
            qb, kb, vb, gb = (t.bfloat16() for t in (q, k, v, g))
            refb = grads(lambda a, b, c: dc.masked_reference(a, b, c, mask, scale), qb.double(), kb.double(),
                         vb.double(), gb.double())
            ours = grads(op, qb, kb, vb, gb)
            sdpa = grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask, scale=scale),
                         qb, kb, vb, gb)
            e_ours = [dc.rel_err(x, y) for x, y in zip(ours, refb)]
            e_sdpa = [dc.rel_err(x, y) for x, y in zip(sdpa, refb)]
            check("bf16_within_sdpa_error", all(a <= 2 * b + 1e-3 for a, b in zip(e_ours, e_sdpa)),
                  ours=e_ours, sdpa=e_sdpa, **tag)
        except Exception as e:  # noqa: BLE001 - one size failing must not hide the others
            check("exception", False, error=f"{type(e).__name__}: {str(e)[:400]}", **tag)

    # float64 gradcheck at a small N (the diagonal path via fibottention_like, the CSR one via random)
    for kind in ("fibottention_like", "random"):
        N, H, D = 12, 2, 8
        try:
            rp, ci = dc.fibottention_like(N, H) if kind == "fibottention_like" else dc.random_pattern(N, H, 3)
            q, k, v = (torch.randn(1, H, N, D, device=dev, dtype=torch.float64, requires_grad=True) for _ in range(3))
            ok = torch.autograd.gradcheck(lambda a, b, c: ops.sparse_attention(a, b, c, rp, ci, 0.35), (q, k, v),
                                          eps=1e-6, atol=1e-7, rtol=1e-6, raise_exception=False)
            check("gradcheck_float64", ok, N=N, H=H, D=D, pattern=kind)
        except Exception as e:  # noqa: BLE001
            check("exception", False, error=f"{type(e).__name__}: {str(e)[:400]}", N=N, pattern=kind)

    rec.add(summary="correctness", failures=failures, passed=not failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
