#!/usr/bin/env python3
"""A timm vit_base_patch16_224 training step in bf16 autocast (batch 64 by default) on the device:
dense vs sparsevit.patch_model with Fibottention (configs/attention/vit_fibottention.yaml); step time
median of 10 after 3 warm-up steps (scripts/device-check, stage "vit-step"). The models are patched on
the CPU and then moved with .cuda(), and every parameter and buffer is checked to be on the GPU
before anything is timed. Needs timm and the package's core (_sparsevit_core in $SPARSEVIT_BUILD);
without them it records why and exits 5 (skipped)."""
import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SCRIPT = "vit_step.py"
EXIT_SKIPPED = 5


def off_device(model):
    """Names of the parameters and buffers not on a CUDA device."""
    return [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if not t.is_cuda]


def main(argv=None):
    ap = argparse.ArgumentParser(description="timm ViT-B/16 training step, dense vs sparsevit (needs a GPU).")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--label", default="correctness=unknown", help="carried in every record")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for vit_step.jsonl")
    args = ap.parse_args(argv)
    import torch
    import device_common as dc
    dc.require_cuda(SCRIPT)
    rec = dc.Records(os.path.join(args.out, "vit_step.jsonl"), label=args.label)
    try:
        import timm
        sys.path.insert(0, os.path.join(dc.ROOT, "python"))
        import sparsevit
        sparsevit.patterns.stats(os.path.join(dc.ROOT, "configs", "attention", "vit_fibottention.yaml"), 197, 12, 12)
    except Exception as e:  # noqa: BLE001
        rec.add(bench="vit_step", skipped=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        print(f"{SCRIPT}: skipped: {str(e).splitlines()[0][:200]}", file=sys.stderr)
        return EXIT_SKIPPED
    torch.manual_seed(0)
    dense_cpu = timm.create_model("vit_base_patch16_224", pretrained=False)
    sparse_cpu = copy.deepcopy(dense_cpu)
    # Patch first (on the CPU), then move: the new attention layers must end up on the GPU with the rest.
    report = sparsevit.patch_model(sparse_cpu, os.path.join(dc.ROOT, "configs", "attention", "vit_fibottention.yaml"))
    dense, sparse = dense_cpu.cuda(), sparse_cpu.cuda()
    for name, model in (("dense", dense), ("sparsevit_fibottention", sparse)):
        left = off_device(model)
        if left:
            rec.add(bench="vit_step", model=name, error=f"{len(left)} tensors not on the GPU after .cuda(): {left[:5]}")
            return 1
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (args.batch,), device="cuda")
    failed = False
    for name, model in (("dense", dense), ("sparsevit_fibottention", sparse)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        try:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            times = []
            for _ in range(args.steps):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                step()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            times.sort()
            rec.add(bench="vit_step", model=name, batch=args.batch, step_ms=times[len(times) // 2],
                    step_ms_min=times[0], step_ms_max=times[-1], steps=args.steps,
                    images_per_s=args.batch / (times[len(times) // 2] * 1e-3),
                    peak_memory_gib=torch.cuda.max_memory_allocated() / 2 ** 30,
                    report={k: report.get(k) for k in ("density", "layers_patched", "pruning_ratio")}
                    if name != "dense" else None)
        except Exception as e:  # noqa: BLE001
            rec.add(bench="vit_step", model=name, error=f"{type(e).__name__}: {str(e)[:400]}")
            failed = True
        torch.cuda.reset_peak_memory_stats()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
