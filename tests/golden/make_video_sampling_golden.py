#!/usr/bin/python3
"""Regenerates tests/golden/video_sampling_golden.inc.

TimeSformer's clip sampling (facebookresearch/TimeSformer: timesformer/datasets/decoder.py,
transform.py, utils.py, kinetics.py), transcribed here with torch independently of
src/data/video_sampling.cpp, evaluated on:

  temporal   a table of (video_frames, fps, num_frames, sampling_rate, clip_idx, num_clips) with
             TARGET_FPS 30: clip size, start / end (get_start_end_idx, deterministic clip_idx >= 0)
             and the frames temporal_sampling selects (torch.linspace, clamp, long, on a video
             whose frame t holds t). Short videos that repeat their last frame, fps != 30, and
             16- to 96-frame clips, where torch's CPU linspace kernel writes vectors.
  linspace   raw float32 values of torch.linspace for a few (start, end, steps).
  spatial    short_side_scale (random_short_side_scale_jitter with min == max) and uniform_crop
             on fixed float [3, 2, 7, 11] (landscape) and [3, 2, 11, 7] (portrait) frames.
  test views Kinetics' test path end to end (decode's temporal sampling, tensor_normalize with
             mean 0 / std 1, spatial_sampling, the 'vit' linspace re-selection) for every view of
             a small uint8 clip, with 3 spatial crops and with 1.

Run with Debian's Python (python3-torch): /usr/bin/python3 tests/golden/make_video_sampling_golden.py
"""
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_FPS = 30


# ---------------------------------------------------------------- TimeSformer, transcribed

def get_start_end_idx(video_size, clip_size, clip_idx, num_clips):
    delta = max(video_size - clip_size, 0)
    assert clip_idx >= 0, "only the deterministic views are golden"
    start_idx = delta * clip_idx / num_clips
    end_idx = start_idx + clip_size - 1
    return start_idx, end_idx


def temporal_sampling(frames, start_idx, end_idx, num_samples):
    index = torch.linspace(start_idx, end_idx, num_samples)
    index = torch.clamp(index, 0, frames.shape[0] - 1).long()
    return torch.index_select(frames, 0, index)


def short_side_scale(images, size):
    """random_short_side_scale_jitter(images, size, size): the draw is always `size`."""
    height, width = images.shape[2], images.shape[3]
    if (width <= height and width == size) or (height <= width and height == size):
        return images
    new_width = size
    new_height = size
    if width < height:
        new_height = int(math.floor((float(height) / width) * size))
    else:
        new_width = int(math.floor((float(width) / height) * size))
    return F.interpolate(images, size=(new_height, new_width), mode="bilinear", align_corners=False)


def uniform_crop(images, size, spatial_idx):
    assert spatial_idx in [0, 1, 2]
    height, width = images.shape[2], images.shape[3]
    y_offset = int(math.ceil((height - size) / 2))
    x_offset = int(math.ceil((width - size) / 2))
    if height > width:
        if spatial_idx == 0:
            y_offset = 0
        elif spatial_idx == 2:
            y_offset = height - size
    else:
        if spatial_idx == 0:
            x_offset = 0
        elif spatial_idx == 2:
            x_offset = width - size
    return images[:, :, y_offset:y_offset + size, x_offset:x_offset + size]


def kinetics_test_view(clip_cthw_u8, fps, cfg, view):
    """Kinetics.__getitem__ in "test" mode for _spatial_temporal_idx == view, the whole video
    decoded (decode_all_video), mean 0 and std 1."""
    crops, clips = cfg["test_num_crops"], cfg["test_num_clips"]
    temporal_sample_index = view // crops
    spatial_sample_index = (view % crops) if crops > 1 else 1
    min_scale, max_scale, crop_size = (
        [cfg["crop_size"]] * 3 if crops > 1 else [cfg["jitter_min"]] * 2 + [cfg["crop_size"]])
    assert len({min_scale, max_scale}) == 1
    frames = clip_cthw_u8.permute(1, 2, 3, 0)  # the decoder's T H W C
    clip_sz = cfg["sampling_rate"] * cfg["num_frames"] / TARGET_FPS * fps
    start_idx, end_idx = get_start_end_idx(frames.shape[0], clip_sz, temporal_sample_index, clips)
    frames = temporal_sampling(frames, start_idx, end_idx, cfg["num_frames"])
    frames = frames.float() / 255.0  # tensor_normalize(frames, [0, 0, 0], [1, 1, 1])
    frames = (frames - torch.tensor([0.0, 0.0, 0.0])) / torch.tensor([1.0, 1.0, 1.0])
    frames = frames.permute(3, 0, 1, 2)
    frames = short_side_scale(frames, min_scale)  # spatial_sampling, spatial_idx >= 0
    frames = uniform_crop(frames, crop_size, spatial_sample_index)
    frames = torch.index_select(frames, 1, torch.linspace(0, frames.shape[1] - 1, cfg["num_frames"]).long())
    return frames, end_idx > clip_cthw_u8.shape[1] - 1


# ---------------------------------------------------------------- the cases

TEMPORAL = [
    # video_frames, fps, num_frames, sampling_rate, clip_idx, num_clips
    (300, 30.0, 8, 8, 0, 1),
    (300, 30.0, 8, 8, 0, 3),
    (300, 30.0, 8, 8, 1, 3),
    (300, 30.0, 8, 8, 2, 3),
    (300, 30.0, 8, 32, 0, 1),   # TimeSformer_divST_8x32_224: a 256-frame window
    (300, 30.0, 8, 32, 4, 10),
    (250, 25.0, 8, 8, 1, 2),    # fps 25: a 53.33-frame window
    (250, 24.0, 8, 32, 3, 5),
    (600, 60.0, 8, 8, 1, 2),    # fps 60: 128 frames
    (900, 29.97, 16, 4, 7, 10),
    (40, 30.0, 8, 8, 0, 1),     # shorter than the window: the last frame repeats
    (40, 30.0, 8, 8, 2, 3),
    (10, 30.0, 16, 4, 0, 1),
    (1, 30.0, 8, 8, 0, 1),      # a single frame
    (63, 30.0, 8, 8, 0, 1),     # one frame short of the window
    (64, 30.0, 8, 8, 0, 1),     # exactly the window
    (100, 30.0, 1, 8, 1, 2),    # one frame per clip
    (71, 30.0, 16, 4, 3, 5),    # 16 values: two 8-lane vectors in torch's kernel
    (71, 30.0, 16, 4, 4, 5),
    (78, 30.0, 16, 4, 2, 5),
    (85, 30.0, 16, 4, 1, 5),
    (500, 30.0, 32, 2, 2, 3),
    (700, 30.0, 96, 4, 1, 3),   # TimeSformer_divST_96x4_224
    (300, 25.0, 96, 4, 0, 1),
    (1000, 30.0, 17, 8, 5, 7),
]

LINSPACE = [
    (0.0, 63.0, 8), (12.5, 75.5, 8), (0.0, 7.0, 8), (3.3, 3.3, 5), (5.0, 5.0, 1),
    (2.0, 65.0, 16), (28.0, 91.0, 16), (21.0, 84.0, 16), (0.1, 255.3, 33), (10.0, 1.0, 7),
    (101.5, 484.5, 96), (7.0, 70.0, 100),
]

SPATIAL_SHAPES = {"landscape": (3, 2, 7, 11), "portrait": (3, 2, 11, 7)}
SCALE_SIZES = [5, 9, 7, 4]
CROPS = [(5, 0), (5, 1), (5, 2), (6, 0), (6, 1), (6, 2), (7, 1)]

CLIP_SHAPE = (3, 10, 7, 11)  # uint8 [C, T, H, W]
CLIP_FPS = 30.0
VIEW_CONFIGS = [
    # name, num_frames, sampling_rate, jitter_min, crop_size, test_num_clips, test_num_crops
    ("three_crops", 4, 2, 6, 5, 2, 3),  # an 8-frame window: starts 0 and 1
    ("one_crop", 4, 3, 6, 5, 2, 1),     # a 12-frame window: padded
]


def fixed_frames(shape):
    n = int(np.prod(shape))
    return ((torch.arange(n, dtype=torch.float64) * 37 % 101) / 100.0 + 0.005).float().reshape(shape)


def fixed_clip(shape):
    n = int(np.prod(shape))
    return (torch.arange(n, dtype=torch.int64) * 73 % 256).to(torch.uint8).reshape(shape)


# ---------------------------------------------------------------- writing

def generated_by(script):
    return (f"// Generated by tests/golden/{script} (Python {sys.version.split()[0]}, PyTorch {torch.__version__});"
            f" do not edit.\n// Regenerate: /usr/bin/python3 tests/golden/{script}\n")


def f32(values):
    """float32 values as exact C++ hexadecimal literals."""
    def lit(v):
        return re.sub(r"(\.[0-9a-f]*?)0+p", r"\1p", float.hex(float(v))) + "f"
    return ", ".join(lit(v) for v in np.asarray(values, dtype=np.float32).reshape(-1))


def wrap(items, per_line=6, indent="    "):
    items = items.split(", ") if isinstance(items, str) else items
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return (",\n" + indent).join(lines)


def main():
    out = [generated_by("make_video_sampling_golden.py")]
    out.append(
        "// TimeSformer's clip sampling (decoder.py, transform.py, utils.py, kinetics.py) as transcribed by the\n"
        "// script with torch: temporal windows and frame indices, torch.linspace values, the deterministic\n"
        "// spatial ops and Kinetics' test views. Doubles are exact (shortest round-trip), floats hexadecimal.\n"
        "#pragma once\n\n#include <cstdint>\n#include <vector>\n\nnamespace sparsevit::golden {\n\n"
        "inline constexpr double kTargetFps = 30.0;\n\n"
        "struct TemporalGoldenCase {\n"
        "  int64_t video_frames;\n  double fps;\n  int64_t num_frames, sampling_rate, clip_idx, num_clips;\n"
        "  double clip_size, start, end;\n  bool padded;  // end > video_frames - 1\n"
        "  std::vector<int64_t> indices;\n};\n\n"
        "struct LinspaceGoldenCase {\n  double start, end;\n  int64_t steps;\n  std::vector<float> values;\n};\n\n"
        "struct SpatialGoldenCase {\n  const char* input;  // kLandscape or kPortrait\n"
        "  const char* op;     // \"scale\" (short_side_scale(size)) or \"crop\" (uniform_crop(size, spatial_idx))\n"
        "  int64_t size, spatial_idx;\n  std::vector<int64_t> shape;\n  std::vector<float> values;\n};\n\n"
        "struct TestViewGoldenCase {\n  const char* config;\n"
        "  int64_t num_frames, sampling_rate, jitter_min, crop_size, test_num_clips, test_num_crops, view;\n"
        "  bool padded;\n  std::vector<int64_t> shape;\n  std::vector<float> values;\n};\n\n")

    out.append("inline const std::vector<TemporalGoldenCase> kTemporalCases = {\n")
    for vs, fps, nf, sr, ci, nc in TEMPORAL:
        clip_size = sr * nf / TARGET_FPS * fps
        start, end = get_start_end_idx(vs, clip_size, ci, nc)
        idx = temporal_sampling(torch.arange(vs), start, end, nf).tolist()
        padded = end > vs - 1
        out.append(f"    {{{vs}, {fps!r}, {nf}, {sr}, {ci}, {nc}, {clip_size!r}, {start!r}, {end!r}, "
                   f"{'true' if padded else 'false'},\n     {{{wrap([str(i) for i in idx], 16, '      ')}}}}},\n")
    out.append("};\n\n")

    out.append("inline const std::vector<LinspaceGoldenCase> kLinspaceCases = {\n")
    for a, b, n in LINSPACE:
        vals = torch.linspace(a, b, n).numpy()
        out.append(f"    {{{a!r}, {b!r}, {n},\n     {{{wrap(f32(vals), 6, '      ')}}}}},\n")
    out.append("};\n\n")

    for name, shape in SPATIAL_SHAPES.items():
        const = "kLandscape" if name == "landscape" else "kPortrait"
        out.append(f"// float32 {list(shape)}: ((37 i mod 101) / 100 + 0.005) for the flat index i.\n")
        out.append(f"inline const std::vector<int64_t> {const}Shape = {{{', '.join(map(str, shape))}}};\n")
        out.append(f"inline const std::vector<float> {const}Values = {{\n    {wrap(f32(fixed_frames(shape)), 6)}}};\n\n")
    out.append("inline const std::vector<SpatialGoldenCase> kSpatialCases = {\n")
    for name, shape in SPATIAL_SHAPES.items():
        const = "kLandscape" if name == "landscape" else "kPortrait"
        x = fixed_frames(shape)
        for size in SCALE_SIZES:
            y = short_side_scale(x, size)
            out.append(f"    {{\"{const}\", \"scale\", {size}, -1, {{{', '.join(map(str, y.shape))}}},\n"
                       f"     {{{wrap(f32(y), 6, '      ')}}}}},\n")
        for size, idx in CROPS:
            y = uniform_crop(x, size, idx)
            out.append(f"    {{\"{const}\", \"crop\", {size}, {idx}, {{{', '.join(map(str, y.shape))}}},\n"
                       f"     {{{wrap(f32(y), 6, '      ')}}}}},\n")
    out.append("};\n\n")

    clip = fixed_clip(CLIP_SHAPE)
    out.append(f"// uint8 {list(CLIP_SHAPE)} at {CLIP_FPS} fps: (73 i mod 256) for the flat index i.\n")
    out.append(f"inline constexpr double kViewClipFps = {CLIP_FPS!r};\n")
    out.append(f"inline const std::vector<int64_t> kViewClipShape = {{{', '.join(map(str, CLIP_SHAPE))}}};\n\n")
    out.append("inline const std::vector<TestViewGoldenCase> kTestViewCases = {\n")
    for name, nf, sr, jmin, crop, clips, crops in VIEW_CONFIGS:
        cfg = dict(num_frames=nf, sampling_rate=sr, jitter_min=jmin, crop_size=crop,
                   test_num_clips=clips, test_num_crops=crops)
        for view in range(clips * crops):
            y, padded = kinetics_test_view(clip, CLIP_FPS, cfg, view)
            out.append(f"    {{\"{name}\", {nf}, {sr}, {jmin}, {crop}, {clips}, {crops}, {view}, "
                       f"{'true' if padded else 'false'}, {{{', '.join(map(str, y.shape))}}},\n"
                       f"     {{{wrap(f32(y), 6, '      ')}}}}},\n")
    out.append("};\n\n}  // namespace sparsevit::golden\n")

    path = os.path.join(HERE, "video_sampling_golden.inc")
    with open(path, "w") as f:
        f.write("".join(out))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
