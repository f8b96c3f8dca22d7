#!/usr/bin/python3
"""Regenerates tests/golden/vit_tiny_weights.inc and tests/golden/vit_forward_golden.inc.

The logits and losses of a tiny ViT (tests/golden/vit_reference.py: an independent float64
implementation of timm's VisionTransformer) for fixed weights and images, dense and with
sparse attention patterns built here independently of sparsevit's mask generators:

  dense            attention: {backend: vit}
  fibo_reference   Fibottention as the published code builds it (compat: reference), run by
                   sparsevit's sparse operator
  local_heads      mask local, one half-width per head (1 and 3), no main diagonal, sparse operator
  local_layers     mask local, one half-width per layer (2 and 6), dilation 2, dense masked kernel

Losses: cross-entropy and timm's label-smoothing cross-entropy (smoothing 0.1, the trainer's
default) of the logits against fixed labels. Everything is computed in float64.

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_vit_golden.py
"""
import os

import torch

import vit_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
SMOOTHING = 0.1
BATCH = 3
LABELS = [1, 4, 2]
INPUT_SEED = 7


def cases():
    g = ref.GEOMETRY
    N, H, L = ref.num_tokens(), g["num_heads"], g["depth"]
    return [
        ("dense", "attention: {backend: vit}", None),
        ("fibo_reference",
         "attention: {backend: vit, mask: fibo, mask_kwargs: {compat: reference}, kernel: sparse}",
         [ref.fibottention_reference_mask(N, H, layer) for layer in range(L)]),
        ("local_heads",
         "attention: {backend: vit, mask: local, mask_kwargs: {head_windows: [1, 3], include_diagonal: false},"
         " kernel: sparse}",
         [ref.local_mask(N, [1, 3], include_diagonal=False)] * L),
        ("local_layers",
         "attention: {backend: vit, mask: local, mask_kwargs: {layer_windows: [2, 6], dilation: 2}, kernel: masked}",
         [ref.local_mask(N, [w] * H, dilation=2) for w in (2, 6)]),
    ]


def smoothed_ce(logits, labels):
    return ref.label_smoothing_cross_entropy(logits, labels, SMOOTHING).item()


def write_weights(weights, path):
    g = ref.GEOMETRY
    text = ref.generated_by("make_vit_golden.py")
    text += ("// The tiny ViT's geometry and its weights, keyed by parameter name (float32 values; the\n"
             "// reference computes with them in float64).\n#pragma once\n\n"
             "#include \"golden/golden_fixture.h\"\n\nnamespace sparsevit::golden {\n\n")
    text += "inline const TinyVitGeometry kTinyVit = {" + ", ".join(
        str(g[k]) for k in ("img_size", "patch_size", "in_chans", "embed_dim", "depth", "num_heads", "mlp_ratio",
                            "num_classes")) + "};\n\n"
    entries = []
    for i, (name, shape) in enumerate(ref.parameter_shapes()):
        array = f"kTinyVitWeight{i}"
        text += f"// {name} {list(shape)}\n" + ref.cpp_float32_array(array, weights[name]) + "\n"
        entries.append(f'    {{"{name}", {{{", ".join(str(s) for s in shape)}}}, {array}}},')
    text += "inline const std::vector<GoldenTensor> kTinyVitWeights = {\n" + "\n".join(entries) + "\n};\n\n"
    text += "}  // namespace sparsevit::golden\n"
    with open(path, "w") as f:
        f.write(text)


def main():
    weights = ref.make_weights()
    g = ref.GEOMETRY
    gen = torch.Generator().manual_seed(INPUT_SEED)
    images = torch.randn(BATCH, g["in_chans"], g["img_size"], g["img_size"], generator=gen, dtype=torch.float64)
    images = images.to(torch.float32).to(torch.float64)
    labels = torch.tensor(LABELS, dtype=torch.int64)

    text = ref.generated_by("make_vit_golden.py")
    text += ("// Logits and losses of the tiny ViT (vit_tiny_weights.inc) for fixed images, computed in float64\n"
             "// by an independent reference of timm's ViT.\n#pragma once\n\n"
             "#include \"golden/golden_fixture.h\"\n\nnamespace sparsevit::golden {\n\n")
    text += f"inline constexpr double kForwardSmoothing = {SMOOTHING};\n"
    text += ref.cpp_float32_array("kForwardImageValues", images) + "\n"
    text += f"inline const std::vector<int64_t> kForwardImageShape = {{{', '.join(str(s) for s in images.shape)}}};\n"
    text += f"inline const std::vector<int64_t> kForwardLabels = {{{', '.join(str(v) for v in LABELS)}}};\n\n"
    entries = []
    summary = []
    for name, yaml, masks in cases():
        logits = ref.vit_forward(weights, images, masks)
        functional = ref.vit_forward_functional(weights, images, masks)
        assert torch.allclose(logits, functional, rtol=0, atol=1e-12), (name, (logits - functional).abs().max())
        assert torch.isclose(torch.tensor(smoothed_ce(logits, labels)), torch.tensor(
            torch.nn.functional.cross_entropy(logits, labels, label_smoothing=SMOOTHING).item()), rtol=0, atol=1e-12)
        ce = ref.cross_entropy(logits, labels).item()
        smoothed = ref.label_smoothing_cross_entropy(logits, labels, SMOOTHING).item()
        array = f"kForwardLogits_{name}"
        text += ref.cpp_float64_array(array, logits) + "\n"
        entries.append(f'    {{"{name}", "{yaml}", {array}, {ref.float64_literal(ce)}, {ref.float64_literal(smoothed)}}},')
        density = "dense" if masks is None else " ".join(f"{m.float().mean().item():.3f}" for m in masks)
        summary.append(f"{name}: ce {ce:.6f} smoothed {smoothed:.6f} density per layer {density}")
    text += "inline const std::vector<VitForwardCase> kVitForwardCases = {\n" + "\n".join(entries) + "\n};\n\n"
    text += "}  // namespace sparsevit::golden\n"

    write_weights(weights, os.path.join(HERE, "vit_tiny_weights.inc"))
    with open(os.path.join(HERE, "vit_forward_golden.inc"), "w") as f:
        f.write(text)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
