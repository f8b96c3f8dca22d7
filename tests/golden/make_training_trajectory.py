#!/usr/bin/python3
"""Regenerates tests/golden/training_trajectory_golden.inc.

Ten training steps of the tiny ViT (tests/golden/vit_reference.py, weights of
vit_tiny_weights.inc) on fixed synthetic batches, in float64, recording the loss of every step
and the logits after the last one. It pins the recipe of sparsevit's trainer, so a silent
change in the optimizer, the schedule or the loss shows as a different trajectory:

  data      10 batches of 4 from one splitmix64 stream (vit_reference.synthetic_batches);
            no augmentation, no mixup, no drop-path or dropout
  loss      timm's LabelSmoothingCrossEntropy, smoothing 0.1
  lr        MAE's per-iteration schedule (util/lr_sched.py, sparsevit train/lr_schedule.cpp) at
            the fractional epoch f = epoch + it / iters_per_epoch:
              f <  warmup: lr * f / warmup
              f >= warmup: min_lr + (lr - min_lr) * (1 + cos(pi * (f - warmup) / (epochs - warmup))) / 2
            here 2 epochs of 5 iterations, warmup 0.6 epochs, lr 2e-3, min_lr 1e-5
  optimizer AdamW (Loshchilov & Hutter; PyTorch's form), betas (0.9, 0.999), eps 1e-6, weight
            decay 0.05 on the decay group only: timm's param_groups_weight_decay puts biases,
            1-d tensors (norm weights) and the names in no_weight_decay() (pos_embed, cls_token)
            in a group without decay. Per step t, per parameter:
              p *= 1 - lr * wd
              m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
              p -= lr * (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps)
  step      lr set, forward, loss, backward, AdamW step (no gradient clipping: the trainer's
            default clip_grad 0)

Two models: dense attention, and the published Fibottention masks run by the sparse operator
(so its backward is pinned too). The hand-written AdamW is checked against torch.optim.AdamW.

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_training_trajectory.py
"""
import math
import os

import torch

import make_vit_golden
import vit_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))

RECIPE = dict(lr=2e-3, min_lr=1e-5, warmup_epochs=0.6, epochs=2, iters_per_epoch=5, batch_size=4,
              weight_decay=0.05, opt_eps=1e-6, beta1=0.9, beta2=0.999, smoothing=0.1, data_seed=2026)
NO_WEIGHT_DECAY = ("pos_embed", "cls_token", "dist_token")


def lr_at(f, r=RECIPE):
    if f < r["warmup_epochs"]:
        return r["lr"] * f / r["warmup_epochs"]
    progress = min(max((f - r["warmup_epochs"]) / (r["epochs"] - r["warmup_epochs"]), 0.0), 1.0)
    return r["min_lr"] + (r["lr"] - r["min_lr"]) * 0.5 * (1.0 + math.cos(math.pi * progress))


def decays(name, tensor):
    return not (tensor.dim() <= 1 or name.endswith(".bias") or name.split(".")[-1] in NO_WEIGHT_DECAY)


class AdamW:
    def __init__(self, params, r=RECIPE):
        self.params, self.r, self.t = params, r, 0
        self.m = {n: torch.zeros_like(p) for n, p in params.items()}
        self.v = {n: torch.zeros_like(p) for n, p in params.items()}

    @torch.no_grad()
    def step(self, lr):
        r = self.r
        self.t += 1
        b1, b2 = r["beta1"], r["beta2"]
        for n, p in self.params.items():
            g = p.grad
            if decays(n, p):
                p.mul_(1.0 - lr * r["weight_decay"])
            self.m[n].mul_(b1).add_((1.0 - b1) * g)
            self.v[n].mul_(b2).add_((1.0 - b2) * g * g)
            denom = self.v[n].sqrt() / math.sqrt(1.0 - b2 ** self.t) + r["opt_eps"]
            p.sub_(lr * (self.m[n] / (1.0 - b1 ** self.t)) / denom)


class TorchAdamW:
    """torch.optim.AdamW with timm's two groups: the cross-check of the hand-written one."""

    def __init__(self, params, r=RECIPE):
        decay = [p for n, p in params.items() if decays(n, p)]
        no_decay = [p for n, p in params.items() if not decays(n, p)]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": r["weight_decay"]},
                                      {"params": no_decay, "weight_decay": 0.0}],
                                     lr=r["lr"], betas=(r["beta1"], r["beta2"]), eps=r["opt_eps"])

    def step(self, lr):
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()


def train(masks, batches, optimizer_class, r=RECIPE):
    """The losses of the 10 steps and the parameters after them."""
    params = {n: w.clone().requires_grad_(True) for n, w in ref.make_weights().items()}
    optimizer = optimizer_class(params)
    losses = []
    for step, (images, labels) in enumerate(batches):
        epoch, it = divmod(step, r["iters_per_epoch"])
        lr = lr_at(epoch + it / r["iters_per_epoch"])
        loss = ref.label_smoothing_cross_entropy(ref.vit_forward(params, images, masks), labels, r["smoothing"])
        for p in params.values():
            p.grad = None
        loss.backward()
        optimizer.step(lr)
        losses.append(loss.item())
    return losses, {n: p.detach() for n, p in params.items()}


def main():
    r = RECIPE
    steps = r["epochs"] * r["iters_per_epoch"]
    batches = ref.synthetic_batches(r["data_seed"], steps, r["batch_size"])
    forward_cases = {name: (yaml, masks) for name, yaml, masks in make_vit_golden.cases()}
    gen = torch.Generator().manual_seed(make_vit_golden.INPUT_SEED)
    g = ref.GEOMETRY
    images = torch.randn(make_vit_golden.BATCH, g["in_chans"], g["img_size"], g["img_size"], generator=gen,
                         dtype=torch.float64).to(torch.float32).to(torch.float64)  # kForwardImageValues

    text = ref.generated_by("make_training_trajectory.py")
    text += ("// Ten training steps of the tiny ViT (vit_tiny_weights.inc) in float64: the loss of every step\n"
             "// and the logits of kForwardImageValues after the last step. See the script for the recipe.\n"
             "#pragma once\n\n#include \"golden/golden_fixture.h\"\n\nnamespace sparsevit::golden {\n\n")
    text += "inline const GoldenTrainingRecipe kTrajectoryRecipe = {" + ", ".join(
        ref.float64_literal(r[k]) if isinstance(r[k], float) else str(r[k])
        for k in ("lr", "min_lr", "warmup_epochs", "epochs", "iters_per_epoch", "batch_size", "weight_decay",
                  "opt_eps", "beta1", "beta2", "smoothing", "data_seed")) + "};\n\n"
    # What the C++ generator must reproduce before any model runs: per batch, the sum of the
    # pixels (exact: multiples of 1/128) and the sum of the labels.
    sums = [f"{{{ref.float64_literal(x.sum().item())}, {int(y.sum().item())}}}" for x, y in batches]
    text += "inline const std::vector<SyntheticBatchSums> kTrajectoryBatchSums = {\n" + ref.wrap(sums, 4) + "\n};\n\n"
    entries, summary = [], []
    for name in ("dense", "fibo_reference"):
        yaml, masks = forward_cases[name]
        losses, params = train(masks, batches, AdamW)
        torch_losses, torch_params = train(masks, batches, TorchAdamW)
        assert max(abs(a - b) for a, b in zip(losses, torch_losses)) < 1e-12, (losses, torch_losses)
        for n in params:
            assert torch.allclose(params[n], torch_params[n], rtol=0, atol=1e-12), n
        final_logits = ref.vit_forward(params, images, masks)
        text += ref.cpp_float64_array(f"kTrajectoryLosses_{name}", torch.tensor(losses, dtype=torch.float64)) + "\n"
        text += ref.cpp_float64_array(f"kTrajectoryFinalLogits_{name}", final_logits) + "\n"
        entries.append(f'    {{"{name}", "{yaml}", kTrajectoryLosses_{name}, kTrajectoryFinalLogits_{name}}},')
        summary.append(f"{name}: " + " ".join(f"{x:.5f}" for x in losses))
    text += "inline const std::vector<TrajectoryCase> kTrajectoryCases = {\n" + "\n".join(entries) + "\n};\n\n"
    text += "}  // namespace sparsevit::golden\n"
    with open(os.path.join(HERE, "training_trajectory_golden.inc"), "w") as f:
        f.write(text)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
