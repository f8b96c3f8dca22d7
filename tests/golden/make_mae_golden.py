#!/usr/bin/python3
"""Regenerates tests/golden/mae_golden.inc: the tiny MAE of mae_reference.py (weights by MAE's
parameter names, images, noise) and the float64 reference's loss, prediction and mask for

  dense_mae_order      dense attention, MAE's shuffled visible order (sparsevit keeps raster order:
                       equal for dense attention, which is permutation-equivariant)
  dense_norm_pix       the same with norm_pix_loss
  local_raster         encoder attention `local` (one half-width per head: 1 and 2, no main
                       diagonal) over the 5 encoder tokens in raster order, masks built here

Also MAE's sin-cos table for a 16-wide, 4x4 grid with a class row, and the parameter count of
mae_vit_base_patch16 (MAE's models_mae.py shapes, without the fixed position embeddings).

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_mae_golden.py
"""
import os

import torch

import mae_reference as mae
import vit_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 2


def vit_b_mae_parameter_count():
    g = dict(img_size=224, patch_size=16, in_chans=3, embed_dim=768, depth=12, num_heads=12,
             decoder_embed_dim=512, decoder_depth=8, decoder_num_heads=16, mlp_ratio=4, mask_ratio=0.75)
    total = 0
    for _, shape in mae.parameter_shapes(g):
        n = 1
        for s in shape:
            n *= s
        total += n
    return total


def main():
    g = mae.GEOMETRY
    w = mae.make_weights()
    gen = torch.Generator().manual_seed(5)
    imgs = torch.randn(BATCH, g["in_chans"], g["img_size"], g["img_size"], generator=gen, dtype=torch.float64)
    imgs = imgs.to(torch.float32).to(torch.float64)
    noise = torch.rand(BATCH, mae.num_patches(), generator=gen, dtype=torch.float64).to(torch.float32).to(torch.float64)
    N = mae.len_keep() + 1
    local = [ref.local_mask(N, [1, 2], include_diagonal=False)] * g["depth"]
    cases = [
        ("dense_mae_order", "attention: {backend: vit}", False, mae.mae_forward(w, imgs, noise, "mae")),
        ("dense_norm_pix", "attention: {backend: vit}", True, mae.mae_forward(w, imgs, noise, "mae", True)),
        ("local_raster", "attention: {backend: vit, mask: local, mask_kwargs: {head_windows: [1, 2], "
                         "include_diagonal: false}, kernel: sparse}", False,
         mae.mae_forward(w, imgs, noise, "raster", False, local)),
    ]
    # Raster order changes nothing for dense attention.
    dense_raster = mae.mae_forward(w, imgs, noise, "raster")
    assert torch.allclose(dense_raster[0], cases[0][3][0], atol=1e-12)

    text = ref.generated_by("make_mae_golden.py")
    text += ("// The tiny MAE's weights (MAE's names), inputs and the float64 reference's outputs.\n#pragma once\n\n"
             "#include <cstdint>\n#include <vector>\n\n#include \"golden/golden_fixture.h\"\n\n"
             "namespace sparsevit::golden {\n\n")
    text += "struct MaeGoldenCase {\n  const char* name;\n  const char* attention_yaml;\n  bool norm_pix_loss;\n"
    text += "  double loss;\n  const double* pred;\n  const double* mask;\n};\n\n"
    entries = []
    for i, (name, shape) in enumerate(mae.parameter_shapes()):
        text += f"// {name} {list(shape)}\n" + ref.cpp_float32_array(f"kMaeWeight{i}", w[name]) + "\n"
        entries.append(f'    {{"{name}", {{{", ".join(str(s) for s in shape)}}}, kMaeWeight{i}}},')
    text += "inline const std::vector<GoldenTensor> kMaeWeights = {\n" + "\n".join(entries) + "\n};\n\n"
    text += ref.cpp_float32_array("kMaeImages", imgs) + "\n" + ref.cpp_float32_array("kMaeNoise", noise) + "\n"
    text += f"inline constexpr int64_t kMaeBatch = {BATCH};\n\n"
    rows = []
    for name, yaml, norm_pix, (loss, pred, mask) in cases:
        text += ref.cpp_float64_array(f"kMaePred_{name}", pred) + ref.cpp_float64_array(f"kMaeMask_{name}", mask) + "\n"
        rows.append(f'    {{"{name}", "{yaml}", {"true" if norm_pix else "false"}, {ref.float64_literal(loss.item())}, '
                    f"kMaePred_{name}, kMaeMask_{name}}},")
        print(name, loss.item())
    text += "inline const std::vector<MaeGoldenCase> kMaeCases = {\n" + "\n".join(rows) + "\n};\n\n"
    text += ref.cpp_float64_array("kMaeSincos16x4", mae.sincos_2d(16, 4, True)) + "\n"
    text += f"inline constexpr int64_t kMaeVitBaseParameters = {vit_b_mae_parameter_count()};\n\n"
    text += "}  // namespace sparsevit::golden\n"
    with open(os.path.join(HERE, "mae_golden.inc"), "w") as f:
        f.write(text)
    print("mae_vit_base_patch16 parameters:", vit_b_mae_parameter_count())


if __name__ == "__main__":
    main()
