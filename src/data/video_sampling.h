// TimeSformer's clip sampling (facebookresearch/TimeSformer, timesformer/datasets/decoder.py,
// utils.py, transform.py, kinetics.py): which frames of a decoded video make a clip, and the
// spatial scale / crop / flip applied to them, for training (one random view) and testing
// (test_num_clips x test_num_crops deterministic views). Formulas, defaults and the deviations
// from TimeSformer: docs/video.md, "Clip sampling (TimeSformer)".
//
// Layout: the building blocks take and return float32 [C, T, H, W] with values in [0, 1] (the
// layout TimeSformer's spatial_sampling sees); the pipelines take a VideoClip's uint8
// [C, T, H, W] and convert to float only after the temporal selection. Random draws go through
// data/random.h, so a seed gives the same clip with every standard library.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "data/random.h"
#include "data/video_clip.h"

namespace sparsevit::data {

// TimeSformer's DATA.* / TEST.* settings.
struct ClipSampling {
  int64_t num_frames = 8;     // DATA.NUM_FRAMES: frames per clip
  int64_t sampling_rate = 8;  // DATA.SAMPLING_RATE: stride between them, in target_fps frames
  double target_fps = 30;     // DATA.TARGET_FPS: the rate sampling_rate is counted in
  int64_t jitter_min = 256;   // DATA.TRAIN_JITTER_SCALES: train short side drawn in [min, max];
  int64_t jitter_max = 320;   //   also the test short side when test_num_crops == 1
  int64_t crop_size = 224;    // DATA.TRAIN_CROP_SIZE = DATA.TEST_CROP_SIZE
  double hflip = 0.5;         // probability of a horizontal flip in training (0: DATA.RANDOM_FLIP off)
  int64_t test_num_clips = 1;  // TEST.NUM_ENSEMBLE_VIEWS: temporal views
  int64_t test_num_crops = 1;  // TEST.NUM_SPATIAL_CROPS: 1 (centre) or 3 (left/centre/right or top/centre/bottom)
};

// UsageError naming the flag (--num_frames, --sampling_rate, --target_fps, --jitter_min,
// --jitter_max, --crop_size, --hflip, --test_num_clips, --test_num_crops) of the first bad value.
void validate(const ClipSampling& s);

// The window length in source frames: sampling_rate * num_frames / target_fps * fps.
double clip_size_frames(const ClipSampling& s, double fps);

// decoder.get_start_end_idx: delta = max(video_frames - clip_size, 0); start = uniform(0, delta)
// for clip_idx == -1 (one draw from rng, also when delta == 0), else delta * clip_idx / num_clips
// (rng untouched); end = start + clip_size - 1. clip_idx in [-1, num_clips), else RuntimeError.
std::pair<double, double> clip_start_end(int64_t video_frames, double clip_size, int64_t clip_idx,
                                         int64_t num_clips, Rng& rng);

// The float32 values of torch.linspace(start, end, num_samples) as PyTorch 1.13's CPU kernel
// computes them on x86-64 (AVX2 kernels), bit for bit: start and end rounded to float, step =
// (end - start) / (num_samples - 1) in float, the first half counted up from start and the second
// half down from end with fused multiply-adds, and every full block of 16 values written as two
// vectors of 8 (base + k * step, the base from the two-sided formula). docs/video.md.
std::vector<float> torch_linspace_f32(double start, double end, int64_t num_samples);

// decoder.temporal_sampling's indices: torch_linspace_f32(start, end, num_samples), clamped to
// [0, video_frames - 1] and truncated (clamping repeats the last frame when the video is short).
std::vector<int64_t> temporal_indices(double start, double end, int64_t num_samples, int64_t video_frames);

// True when the window runs past the last frame (end > video_frames - 1), i.e. the clip was
// padded by repeating its last frame (happens exactly when clip_size > video_frames).
bool window_exceeds(int64_t video_frames, double end);

// ---------------------------------------------------------------- spatial building blocks
// On float [C, T, H, W] (every (c, t) plane is resized / cropped alike).

// Bilinear resize (F.interpolate(mode="bilinear", align_corners=False), no antialiasing) so
// the short side is `size`; the long side becomes floor(long / short * size). Returned
// unchanged when the short side already is `size` (transform.random_short_side_scale_jitter).
at::Tensor short_side_scale(const at::Tensor& frames, int64_t size);

// transform.random_short_side_scale_jitter: size = round-half-even(uniform(min_size, max_size))
// (one draw), then short_side_scale.
at::Tensor random_short_side_scale(const at::Tensor& frames, int64_t min_size, int64_t max_size, Rng& rng);

// transform.random_crop: size x size at y = randint[0, H - size) when H > size, else 0, then
// x likewise (one draw each, only when that side is larger); returned unchanged (no draws)
// when already size x size. The frames must be at least size x size.
at::Tensor random_crop(const at::Tensor& frames, int64_t size, Rng& rng);

// transform.horizontal_flip: flips the last dimension with probability p (bernoulli(rng, p):
// no draw when p <= 0 or p >= 1).
at::Tensor horizontal_flip(const at::Tensor& frames, double p, Rng& rng);

// transform.uniform_crop: size x size at the centre offsets ceil((H - size) / 2),
// ceil((W - size) / 2); along the longer side (W when H <= W) spatial_idx 0 moves it to the
// start (left / top) and 2 to the end (right / bottom); 1 is the centre.
at::Tensor uniform_crop(const at::Tensor& frames, int64_t size, int64_t spatial_idx);

// ---------------------------------------------------------------- whole pipelines

struct SampledClip {
  at::Tensor frames;    // float32 [C, num_frames, crop_size, crop_size], uint8 / 255
  bool padded = false;  // window_exceeds: the video was shorter than the window
};

// The same in two halves, so that a reader can decode only the frames a view uses
// (data/video_window.h): the temporal half picks the frame indices from the video's frame count
// and rate, the spatial half takes those frames (uint8 [C, num_frames, H, W], in index order).
// sample_train_clip = train_clip_window, then train_clip_pixels on the same rng;
// sample_test_clip = test_clip_window, then test_clip_pixels.
struct ClipWindow {
  std::vector<int64_t> indices;  // num_frames indices in [0, video_frames), non-decreasing
  bool padded = false;           // window_exceeds
};
ClipWindow train_clip_window(int64_t video_frames, double fps, const ClipSampling& s, Rng& rng);
ClipWindow test_clip_window(int64_t video_frames, double fps, const ClipSampling& s, int64_t view);
at::Tensor train_clip_pixels(const at::Tensor& window_frames, const ClipSampling& s, Rng& rng);
at::Tensor test_clip_pixels(const at::Tensor& window_frames, const ClipSampling& s, int64_t view);
// frames.index_select(1, indices): the window's frames of a whole decoded clip.
at::Tensor select_clip_frames(const at::Tensor& frames, const std::vector<int64_t>& indices);

// Training view (kinetics.py, mode "train"). Random draws, in this order: the window start
// (clip_start_end with clip_idx -1), the scale size, the crop's y, the crop's x, the flip.
SampledClip sample_train_clip(const VideoClip& clip, const ClipSampling& s, Rng& rng);

// Test view `view` in [0, test_num_clips * test_num_crops): clip_idx = view / test_num_crops of
// test_num_clips uniform windows, spatial_idx = test_num_crops > 1 ? view % test_num_crops : 1.
// Short side scaled to crop_size when test_num_crops == 3, to jitter_min when it is 1 (as
// kinetics.py does), then uniform_crop(crop_size, spatial_idx). Deterministic.
SampledClip sample_test_clip(const VideoClip& clip, const ClipSampling& s, int64_t view);

}  // namespace sparsevit::data
