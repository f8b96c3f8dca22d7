"""Regenerates tests/golden/conv_stem_golden.inc: timm's early-convolution ViT, to the last bit.

Run with the PyPI platform's venv (it imports timm 1.0.31 on torch 2.15; Debian's python3 has no
timm), made by scripts/lib/pypi.sh:

    $(ls -d ~/.cache/sparsevit/pypi/venv-* | head -1)/bin/python tests/golden/make_conv_stem_golden.py

The model is timm's own, not a re-implementation: timm.models.vision_transformer.VisionTransformer
with a HybridEmbed whose backbone is timm's ConvStem (Xiao et al. 2021, "Early convolutions help
transformers see better"), built as timm's _create_vision_transformer_hybrid builds it:

  ConvStem(in_chans=3, depth=4, channels=(8, 16, 32, 32), kernel_size=(3, 3, 3, 1),
           stride=(2, 2, 2, 1), padding='')      three 3x3 stride-2 conv (no bias) + BN + ReLU,
                                                 then a 1x1 conv with bias: 32x32 -> 4x4 x 32
  HybridEmbed(backbone=..., patch_size=1, proj=False)
  VisionTransformer(img_size=32, patch_size=1, embed_dim=32, depth=1, num_heads=2, num_classes=5)

sparsevit's VisionTransformer with patch_size=8, stem "conv" and these weights (loaded by name)
must give the same numbers. torch.manual_seed fixes timm's init; then every 1-D parameter (biases,
LayerNorm and BatchNorm affine), the class token, the position embedding and the BatchNorm running
statistics are randomised so that none of them is an identity. Every value is rounded to float32
(what the fixture stores) and the model computes in float64 from those values:

  kConvStemEvalLogits    [3, 5]       eval mode (BN from the running statistics)
  kConvStemTrainLogits   [3, 5]       train mode (BN from the batch statistics; dropout and drop
                                      path are 0)
  kConvStemTokens        [3, 16, 32]  the stem's eval-mode tokens (patch_embed's output)
  kConvStemRunningStats  the BN running mean / var after that one train-mode forward (momentum
                         0.1, unbiased batch variance)

It also prints how far two wrong stems move the eval logits (BN eps 1e-3, GELU for ReLU): the
sharpness the C++ test states.
"""
import copy
import functools
import os
import sys

import numpy as np
import timm
import torch
from timm.layers import HybridEmbed
from timm.models.vision_transformer import VisionTransformer
from timm.models.vision_transformer_hybrid import ConvStem

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = "make_conv_stem_golden.py"
SEED = 0
BATCH = 3
# Ours: patch 8 -> log2(8) = 3 stride-2 convs; timm: patch_size=1 on the stem's 6x6 map.
GEOMETRY = dict(img_size=32, patch_size=8, in_chans=3, embed_dim=32, depth=1, num_heads=2, mlp_ratio=4,
                num_classes=5)


def make_timm_vit(bn_eps=1e-5, act_layer=torch.nn.ReLU):
    g = GEOMETRY
    e = g["embed_dim"]
    stem = ConvStem(in_chans=g["in_chans"], depth=4, channels=(e // 4, e // 2, e, e), kernel_size=(3, 3, 3, 1),
                    stride=(2, 2, 2, 1), padding="",
                    norm_layer=functools.partial(torch.nn.BatchNorm2d, eps=bn_eps), act_layer=act_layer)
    return VisionTransformer(img_size=g["img_size"], patch_size=1, in_chans=g["in_chans"], embed_dim=e,
                             depth=g["depth"], num_heads=g["num_heads"], mlp_ratio=g["mlp_ratio"],
                             num_classes=g["num_classes"],
                             embed_layer=functools.partial(HybridEmbed, backbone=stem, proj=False))


def randomise(model, calibration_images):
    """Non-identity values for everything timm initialises to 0 / 1 (or near it): 1-D parameters
    around their init, the class token and position embedding at 0.1, the head at std 0.2 (logits
    of order 1), and BN running statistics near what the layer really sees (the statistics of a
    train-mode pass over other images, the mean moved by 0.3 std, the variance scaled by 0.5..2),
    so that the BN eps and the batch-vs-running choice both matter."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in ("cls_token", "pos_embed"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name == "head.weight":
                p.copy_(0.2 * torch.randn_like(p))
            elif p.dim() == 1:
                base = 1.0 if name.endswith(".weight") else 0.0  # norm scales around 1, biases around 0
                p.copy_(base + 0.2 * torch.randn_like(p))
        calibrated = copy.deepcopy(model).train()
        for m in calibrated.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = None  # the plain average: here, this batch's statistics
        calibrated(calibration_images)
        seen = calibrated.state_dict()
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                std = seen[name.replace("running_mean", "running_var")].sqrt()
                b.copy_(seen[name] + 0.3 * std * torch.randn_like(b))
            elif name.endswith("running_var"):
                b.copy_(seen[name] * torch.empty_like(b).uniform_(0.5, 2.0))
        # What the fixture stores: float32 values.
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.copy_(t.float().to(t.dtype))


def float32_literal(v):
    s = str(np.float32(v))
    if "." not in s and "e" not in s and "inf" not in s and "nan" not in s:
        s += ".0"
    return s + "f"


def wrap(items, per_line):
    return "\n".join("    " + ", ".join(items[i:i + per_line]) + "," for i in range(0, len(items), per_line))


def float32_array(name, t):
    return f"inline const float {name}[] = {{\n{wrap([float32_literal(v) for v in t.reshape(-1).tolist()], 8)}\n}};\n"


def float64_array(name, t):
    return f"inline const double {name}[] = {{\n{wrap([repr(float(v)) for v in t.reshape(-1).tolist()], 4)}\n}};\n"


def shape_list(t):
    return "{" + ", ".join(str(s) for s in t.shape) + "}"


def main():
    torch.manual_seed(SEED)
    g = GEOMETRY
    model = make_timm_vit()
    randomise(model, torch.randn(8, g["in_chans"], g["img_size"], g["img_size"]))
    model = model.double()
    images = torch.randn(BATCH, g["in_chans"], g["img_size"], g["img_size"], dtype=torch.float32).double()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    with torch.no_grad():
        model.eval()
        eval_logits = model(images)
        tokens = model.patch_embed(images)
        # The same numbers through torch.nn.functional, written out here: a check that timm's
        # modules compute what the docstring says.
        x = images
        for i in range(3):
            b = f"patch_embed.backbone.{i}."
            x = torch.nn.functional.conv2d(x, state[b + "conv.weight"], stride=2, padding=1)
            x = torch.nn.functional.batch_norm(x, state[b + "bn.running_mean"], state[b + "bn.running_var"],
                                               state[b + "bn.weight"], state[b + "bn.bias"], False, 0.1, 1e-5)
            x = torch.relu(x)
        x = torch.nn.functional.conv2d(x, state["patch_embed.backbone.3.conv.weight"],
                                       state["patch_embed.backbone.3.conv.bias"])
        assert torch.equal(x.flatten(2).transpose(1, 2), tokens), "ConvStem is not conv/BN/ReLU x3 + 1x1 conv"
        assert tokens.shape == (BATCH, (g["img_size"] // g["patch_size"]) ** 2, g["embed_dim"])

        trained = copy.deepcopy(model).train()
        train_logits = trained(images)
        running = []
        for i in range(3):
            b = f"patch_embed.backbone.{i}.bn."
            running.append((b + "running_mean", trained.state_dict()[b + "running_mean"]))
            running.append((b + "running_var", trained.state_dict()[b + "running_var"]))
        assert int(trained.state_dict()["patch_embed.backbone.0.bn.num_batches_tracked"]) == 1

        # Sharpness: the same weights in a stem with BN eps 1e-3, or GELU in place of ReLU.
        effects = {}
        for label, kwargs in (("bn_eps_1e-3", dict(bn_eps=1e-3)), ("gelu", dict(act_layer=torch.nn.GELU))):
            wrong = make_timm_vit(**kwargs).double()
            wrong.load_state_dict(state)
            wrong.eval()
            effects[label] = (wrong(images) - eval_logits).abs().max().item()
            wrong.train()
            effects[label + "_train"] = (wrong(images) - train_logits).abs().max().item()

    text = (f"// Generated by tests/golden/{SCRIPT} (Python {sys.version.split()[0]}, PyTorch {torch.__version__},"
            f" timm {timm.__version__}); do not edit.\n"
            f"// Regenerate: $(ls -d ~/.cache/sparsevit/pypi/venv-* | head -1)/bin/python tests/golden/{SCRIPT}\n"
            "// timm's ViT with an early-convolution stem (ConvStem + HybridEmbed): its state dict by name\n"
            "// (float32), the input images, and its float64 outputs.\n#pragma once\n\n"
            "#include <cstdint>\n#include <vector>\n\n#include \"golden/golden_fixture.h\"\n\n"
            "namespace sparsevit::golden {\n\n")
    text += ("// Ours: patch_size 8 with stem \"conv\" (timm: patch_size 1 after the stem's 8x downsampling).\n"
             "inline const TinyVitGeometry kConvStemVit = {" +
             ", ".join(str(g[k]) for k in ("img_size", "patch_size", "in_chans", "embed_dim", "depth", "num_heads",
                                           "mlp_ratio", "num_classes")) + "};\n\n")
    entries = []
    for i, (name, t) in enumerate(state.items()):
        array = f"kConvStemWeight{i}"
        text += f"// {name} {list(t.shape)}\n" + float32_array(array, t.reshape(-1)) + "\n"
        entries.append(f'    {{"{name}", {shape_list(t)}, {array}}},')
    text += ("// timm's state_dict, every key (BatchNorm buffers included).\n"
             "inline const std::vector<GoldenTensor> kConvStemWeights = {\n" + "\n".join(entries) + "\n};\n\n")
    text += float32_array("kConvStemImageValues", images)
    text += f"inline const std::vector<int64_t> kConvStemImageShape = {shape_list(images)};\n\n"
    text += "// Eval mode.\n" + float64_array("kConvStemEvalLogits", eval_logits) + "\n"
    text += "// Train mode (batch statistics).\n" + float64_array("kConvStemTrainLogits", train_logits) + "\n"
    text += "// patch_embed's eval-mode output [3, 16, 32].\n" + float64_array("kConvStemTokens", tokens) + "\n"
    run_entries = []
    for i, (name, t) in enumerate(running):
        array = f"kConvStemRunning{i}"
        text += float64_array(array, t) + "\n"
        run_entries.append(f'    {{"{name}", {array}}},')
    text += ("struct ConvStemRunningStat {\n  const char* name;\n  const double* values;\n};\n"
             "// The BN running statistics after one train-mode forward of kConvStemImageValues.\n"
             "inline const std::vector<ConvStemRunningStat> kConvStemRunningStats = {\n" + "\n".join(run_entries) +
             "\n};\n\n")
    text += "}  // namespace sparsevit::golden\n"
    with open(os.path.join(HERE, "conv_stem_golden.inc"), "w") as f:
        f.write(text)
    print(f"keys {len(state)}; eval logits max |x| {eval_logits.abs().max().item():.4f}, "
          f"train logits max |x| {train_logits.abs().max().item():.4f}, tokens max |x| {tokens.abs().max().item():.4f}")
    print(f"eval vs train logits max |diff| {(eval_logits - train_logits).abs().max().item():.4f}")
    for label, v in effects.items():
        print(f"sharpness: {label}: logits max |diff| {v:.3e}")


if __name__ == "__main__":
    main()
