#!/usr/bin/python3
"""Regenerates tests/golden/timesformer_golden.inc and the TimeSformer files of tests/golden/predict/.

The logits of a tiny TimeSformer (tests/golden/timesformer_reference.py: an independent float64
implementation of facebookresearch/TimeSformer's VisionTransformer; 8x8x3 frames, patch 4 ->
4 patches, 4 frames, dim 16, depth 2, 2 heads, 5 classes) for fixed weights and clips
[2, 3, 4, 8, 8], with masks built here independently of sparsevit's mask generators:

  divided_dense               divided_space_time, dense spatial and temporal attention
  space_only                  space_only (per-frame ViT, mean over the frames), dense
  joint_space_time            joint_space_time (one sequence of 1 + 4*4 tokens), dense
  divided_spatial_sparse      divided; spatial mask local, half-width 1 and 2 per head over the
                              5 tokens of a frame (class token global), sparse operator
  divided_spatial_masked      the same pattern on the dense masked kernel
  divided_temporal_sparse     divided; temporal mask local over the 4 frames, half-width 1 and 2
                              per head, main diagonal kept, no prefix token, sparse operator
  divided_both_masked         divided; the spatial pattern above and a temporal one (half-width
                              2 and 1), both on the masked kernel
  space_only_spatial_sparse   space_only with the spatial pattern above, sparse operator

The weights are one deterministic set (the divided model's names; space_only and
joint_space_time take the subset they have), exactly representable in float32; temporal_fc is
a full random matrix so the temporal path shows in the logits (the script checks that zeroing
it moves every divided case's logits by more than 1e-2).

tests/golden/predict/ (for `sparsevit predict`):
  timesformer.pth          torch.save of an OrderedDict state dict, every key with TimeSformer's
                           `model.` wrapper prefix (as its checkpoints store model_state); flat,
                           because sparsevit's .pth reader looks for the state dict at the top
                           level or under model / state_dict / model_ema / state_dict_ema /
                           module / net, not under model_state
  clips.npy                float32 clips [2, 3, 4, 8, 8] (the fixture's clips)
  logits_timesformer.npy   float32 logits [2, 5] of divided_dense

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_timesformer_golden.py
"""
import collections
import os

import numpy as np
import torch

import timesformer_reference as tsf
import vit_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "predict")
BATCH = 2
INPUT_SEED = 13

DENSE = "attention: {backend: vit}"
SPATIAL_WINDOWS = [1, 2]
TEMPORAL_WINDOWS = [1, 2]
TEMPORAL_WINDOWS_BOTH = [2, 1]


def local_yaml(windows, kernel, include_diagonal=None):
    kwargs = f"head_windows: [{', '.join(str(w) for w in windows)}]"
    if include_diagonal is not None:
        kwargs += f", include_diagonal: {'true' if include_diagonal else 'false'}"
    return f"attention: {{backend: vit, mask: local, mask_kwargs: {{{kwargs}}}, kernel: {kernel}}}"


def cases():
    """(name, attention_type, spatial yaml, temporal yaml ("" = default-constructed, dense),
    spatial allowed-mask or None, temporal allowed-mask or None)."""
    T = tsf.GEOMETRY["num_frames"]
    spatial = tsf.spatial_local_mask(SPATIAL_WINDOWS)
    temporal = tsf.temporal_local_mask(TEMPORAL_WINDOWS, T)
    temporal_both = tsf.temporal_local_mask(TEMPORAL_WINDOWS_BOTH, T)
    return [
        ("divided_dense", "divided_space_time", DENSE, "", None, None),
        ("space_only", "space_only", DENSE, "", None, None),
        ("joint_space_time", "joint_space_time", DENSE, "", None, None),
        ("divided_spatial_sparse", "divided_space_time", local_yaml(SPATIAL_WINDOWS, "sparse"), "", spatial, None),
        ("divided_spatial_masked", "divided_space_time", local_yaml(SPATIAL_WINDOWS, "masked"), "", spatial, None),
        ("divided_temporal_sparse", "divided_space_time", DENSE, local_yaml(TEMPORAL_WINDOWS, "sparse", True),
         None, temporal),
        ("divided_both_masked", "divided_space_time", local_yaml(SPATIAL_WINDOWS, "masked"),
         local_yaml(TEMPORAL_WINDOWS_BOTH, "masked", True), spatial, temporal_both),
        ("space_only_spatial_sparse", "space_only", local_yaml(SPATIAL_WINDOWS, "sparse"), "", spatial, None),
    ]


def without_temporal_fc(w):
    return {k: (torch.zeros_like(v) if ".temporal_fc." in k else v) for k, v in w.items()}


def write_fixture(path, weights, clips, results):
    g = tsf.GEOMETRY
    text = ref.generated_by("make_timesformer_golden.py")
    text += ("// A tiny TimeSformer (timesformer_reference.py: an independent float64 reference of\n"
             "// facebookresearch/TimeSformer's VisionTransformer): its geometry, weights by parameter name\n"
             "// (TimeSformer's names without the `model.` prefix; float32 values), fixed clips\n"
             "// [B, C, T, H, W] and the reference's float64 logits per case.\n#pragma once\n\n"
             "#include <cstdint>\n#include <vector>\n\n"
             "#include \"golden/golden_fixture.h\"\n\nnamespace sparsevit::golden {\n\n")
    text += ("// One model of this fixture: TimeSformerConfig.attention_type, the spatial attention\n"
             "// (VitConfig.attention) and temporal attention configs (\"\" = a default-constructed spec,\n"
             "// dense), the weights it takes and the reference's logits [batch, classes].\n"
             "struct TimeSformerGoldenCase {\n  const char* name;\n  const char* attention_type;\n"
             "  const char* spatial_attention_yaml;\n  const char* temporal_attention_yaml;\n"
             "  const std::vector<GoldenTensor>* weights;\n  const double* logits;\n};\n\n")
    text += "inline const TinyVitGeometry kTinyTimeSformer = {" + ", ".join(
        str(g[k]) for k in ("img_size", "patch_size", "in_chans", "embed_dim", "depth", "num_heads", "mlp_ratio",
                            "num_classes")) + "};\n"
    text += f"inline constexpr int64_t kTinyTimeSformerFrames = {g['num_frames']};\n\n"
    index = {}
    for i, (name, shape) in enumerate(tsf.parameter_shapes("divided_space_time")):
        array = f"kTimeSformerWeight{i}"
        index[name] = (array, shape)
        text += f"// {name} {list(shape)}\n" + ref.cpp_float32_array(array, weights[name]) + "\n"
    for attention_type in tsf.ATTENTION_TYPES:
        entries = []
        for name, _ in tsf.parameter_shapes(attention_type):
            array, shape = index[name]
            entries.append(f'    {{"{name}", {{{", ".join(str(s) for s in shape)}}}, {array}}},')
        text += (f"inline const std::vector<GoldenTensor> kTimeSformerWeights_{attention_type} = {{\n" +
                 "\n".join(entries) + "\n};\n\n")
    text += ref.cpp_float32_array("kTimeSformerClipValues", clips)
    text += f"inline const std::vector<int64_t> kTimeSformerClipShape = {{{', '.join(str(s) for s in clips.shape)}}};\n\n"
    entries = []
    for (name, attention_type, spatial_yaml, temporal_yaml, _, _), logits in results:
        array = f"kTimeSformerLogits_{name}"
        text += ref.cpp_float64_array(array, logits) + "\n"
        entries.append(f'    {{"{name}", "{attention_type}", "{spatial_yaml}", "{temporal_yaml}", '
                       f'&kTimeSformerWeights_{attention_type}, {array}}},')
    text += "inline const std::vector<TimeSformerGoldenCase> kTimeSformerCases = {\n" + "\n".join(entries) + "\n};\n\n"
    text += "}  // namespace sparsevit::golden\n"
    with open(path, "w") as f:
        f.write(text)


def write_predict_files(weights, clips, logits):
    os.makedirs(OUT, exist_ok=True)
    state = collections.OrderedDict(("model." + name, weights[name].to(torch.float32))
                                    for name, _ in tsf.parameter_shapes("divided_space_time"))
    state._metadata = collections.OrderedDict([("", {"version": 1})])  # as nn.Module.state_dict() has
    torch.save(state, os.path.join(OUT, "timesformer.pth"))
    np.save(os.path.join(OUT, "clips.npy"), clips.to(torch.float32).numpy())
    np.save(os.path.join(OUT, "logits_timesformer.npy"), logits.to(torch.float32).numpy())


def main():
    g = tsf.GEOMETRY
    weights = tsf.make_weights()
    gen = torch.Generator().manual_seed(INPUT_SEED)
    clips = torch.randn(BATCH, g["in_chans"], g["num_frames"], g["img_size"], g["img_size"], generator=gen,
                        dtype=torch.float64).to(torch.float32).to(torch.float64)

    results, summary = [], []
    for case in cases():
        name, attention_type, _, _, spatial, temporal = case
        w = tsf.weights_for(weights, attention_type)
        logits = tsf.timesformer_forward(w, clips, attention_type, spatial, temporal)
        functional = tsf.timesformer_forward_functional(w, clips, attention_type, spatial, temporal)
        assert torch.allclose(logits, functional, rtol=0, atol=1e-12), (name, (logits - functional).abs().max())
        line = f"{name}: logits[0] {[round(v, 6) for v in logits[0].tolist()]}"
        if attention_type == "divided_space_time":
            zeroed = tsf.timesformer_forward(without_temporal_fc(w), clips, attention_type, spatial, temporal)
            moved = (zeroed - logits).abs().max().item()
            assert moved > 1e-2, (name, moved)
            line += f"; temporal_fc zeroed moves them by {moved:.4f}"
        results.append((case, logits))
        summary.append(line)

    # Models that differ give different logits (each mask and each attention type shows); the
    # sparse and masked kernels of one pattern are the same model.
    def model(case):
        return (case[1],) + tuple(None if m is None else tuple(m.flatten().tolist()) for m in case[4:])

    for i in range(len(results)):
        for j in range(i):
            if model(results[i][0]) == model(results[j][0]):
                assert torch.equal(results[i][1], results[j][1])
                continue
            gap = (results[i][1] - results[j][1]).abs().max().item()
            assert gap > 1e-3, (results[i][0][0], results[j][0][0], gap)

    write_fixture(os.path.join(HERE, "timesformer_golden.inc"), weights, clips, results)
    write_predict_files(weights, clips, results[0][1])
    print("\n".join(summary))


if __name__ == "__main__":
    main()
