"""A timm vit_base_patch16_224 training step in bf16 autocast (batch 64 by default) on the device:
dense vs sparsevit.patch_model with Fibottention (configs/attention/vit_fibottention.yaml), step
time median of 10 after 3 warm-up steps (scripts/device-check, stage "benchmarks")."""
import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_common as dc  # noqa: E402
from attention_bench import time_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rec = dc.Records(os.path.join(args.out, "vit_step.jsonl"))
    try:
        import timm
        sys.path.insert(0, os.path.join(dc.ROOT, "python"))
        import sparsevit
    except Exception as e:  # noqa: BLE001
        rec.add(bench="vit_step", skipped=str(e)[:500])
        return 0
    dense = timm.create_model("vit_base_patch16_224", pretrained=False).cuda()
    sparse = copy.deepcopy(dense)
    report = sparsevit.patch_model(sparse, os.path.join(dc.ROOT, "configs", "attention", "vit_fibottention.yaml"))
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (args.batch,), device="cuda")
    for name, model in (("dense", dense), ("sparsevit_fibottention", sparse)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        try:
            ms = time_ms(step, iters=10, warmup=3)
            rec.add(bench="vit_step", model=name, batch=args.batch, step_ms=ms,
                    report={k: report.get(k) for k in ("density", "layers_patched")} if name != "dense" else None)
        except Exception as e:  # noqa: BLE001
            rec.add(bench="vit_step", model=name, error=str(e)[:500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
