"""Speed of the CUDA operator on the device (scripts/device-check, stage "benchmarks"): the packed
op (sparse_attention_qkv on a [B, N, 3*H*D] bf16 buffer) vs SDPA dense (flash), SDPA with the
boolean mask, and compiled FlexAttention with the same mask as a BlockMask (blocks 128 and 64), at
N = 197 / B 64, 1025 / B 16, 3137 / B 8 (H 12, D 64), forward and forward+backward; each against
the memory floor: the bytes a pass must move (q, k, v read once, out and lse written; the backward
also reads out, dO, lse and writes dq, dk, dv) at the bandwidth of a device-to-device copy measured
in the same run. --sizes small: N = 197 at B 8 only (the first run)."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_common as dc  # noqa: E402

FULL = [(197, 64), (1025, 16), (3137, 8)]
SMALL = [(197, 8)]


def time_ms(fn, iters=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth_gbs():
    """Device-to-device copy of 1 GiB: bytes read + written per second."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), iters=10, warmup=3)
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", choices=("small", "full"), default="small")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rec = dc.Records(os.path.join(args.out, "benchmarks.jsonl"))
    ops = dc.load_ops()
    H, D = 12, 64
    bw = copy_bandwidth_gbs()
    rec.add(bench="copy_bandwidth", gb_per_s=bw, device=torch.cuda.get_device_name())
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention)
    except Exception as e:  # noqa: BLE001
        rec.add(bench="flex_attention", skipped=str(e))
        flex = None
    for N, B in (FULL if args.sizes == "full" else SMALL):
        pattern = dc.project_fibottention(N, H) or dc.fibottention_like(N, H)
        rp, ci = pattern
        mask = dc.dense_mask(rp, ci, N, "cuda")
        density = float(mask.float().mean())
        scale = dc.default_scale(D)
        qkv = torch.randn(B, N, 3 * H * D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        g = torch.randn(B, N, H * D, device="cuda", dtype=torch.bfloat16)

        def heads(t):
            return t.view(B, N, 3, H, D).permute(2, 0, 3, 1, 4)

        def ours():
            return ops.sparse_attention_qkv(qkv, H, rp, ci, scale)

        def sdpa_dense():
            q, k, v = heads(qkv)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, scale=scale).transpose(1, 2).reshape(B, N, H * D)

        def sdpa_masked():
            q, k, v = heads(qkv)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale).transpose(1, 2).reshape(
                B, N, H * D)

        methods = {"sparsevit": ours, "sdpa_dense_flash": sdpa_dense, "sdpa_bool_mask": sdpa_masked}
        if flex is not None:
            for block in (128, 64):
                bm = create_block_mask(lambda b, h, qi, ki: mask[h, qi, ki], B=None, H=H, Q_LEN=N, KV_LEN=N,
                                       device="cuda", BLOCK_SIZE=block)

                def run_flex(bm=bm):
                    q, k, v = heads(qkv)
                    return flex(q, k, v, block_mask=bm, scale=scale).transpose(1, 2).reshape(B, N, H * D)
                methods[f"flex_block{block}"] = run_flex
        elem = 2  # bf16
        fwd_bytes = B * H * N * (4 * D * elem + 4)  # q, k, v, out + lse
        bwd_bytes = B * H * N * (9 * D * elem + 4)  # q, k, v, out, dO, dq, dk, dv + lse (plus the forward)
        for name, fn in methods.items():
            try:
                f_ms = time_ms(lambda: fn())
                fb_ms = time_ms(lambda: fn().backward(g))
                rec.add(bench="attention", method=name, N=N, B=B, H=H, D=D, density=density, forward_ms=f_ms,
                        forward_backward_ms=fb_ms, forward_floor_fraction=fwd_bytes / (bw * 1e9) / (f_ms * 1e-3),
                        forward_backward_floor_fraction=(fwd_bytes + bwd_bytes) / (bw * 1e9) / (fb_ms * 1e-3))
            except Exception as e:  # noqa: BLE001 - one method failing must not hide the others
                rec.add(bench="attention", method=name, N=N, B=B, error=str(e)[:500])
            qkv.grad = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
