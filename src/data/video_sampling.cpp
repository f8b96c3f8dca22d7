#include "data/video_sampling.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "util/errors.h"

namespace sparsevit::data {

namespace {

std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void check_frames(const at::Tensor& frames, const char* what) {
  if (!frames.defined() || frames.dim() != 4 || frames.size(0) < 1 || frames.size(1) < 1 || frames.size(2) < 1 ||
      frames.size(3) < 1) {
    throw RuntimeError(std::string(what) + ": expected non-empty [C, T, H, W] frames, got " +
                       (frames.defined() ? std::to_string(frames.dim()) + "-d tensor" : std::string("undefined")));
  }
}

void check_clip(const VideoClip& clip, const char* what) {
  check_frames(clip.frames, what);
  if (clip.frames.scalar_type() != at::kByte) {
    throw RuntimeError(std::string(what) + ": expected uint8 frames, got " + std::string(clip.frames.dtype().name()));
  }
  if (!std::isfinite(clip.fps) || clip.fps <= 0) throw RuntimeError(std::string(what) + ": bad frame rate " + num(clip.fps));
}

// a * b rounded to float on its own, so that no compiler contracts it into a later addition
// (GCC does so by default on targets with FMA); the vector lanes of PyTorch's kernel round twice.
float product(float a, float b) {
  volatile float p = a * b;
  return p;
}

}  // namespace

void validate(const ClipSampling& s) {
  auto at_least = [](int64_t v, int64_t lo, const char* flag) {
    if (v < lo) throw UsageError(std::string(flag) + " must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  };
  at_least(s.num_frames, 1, "--num_frames");
  at_least(s.sampling_rate, 1, "--sampling_rate");
  if (!std::isfinite(s.target_fps) || s.target_fps <= 0) {
    throw UsageError("--target_fps must be a positive number, got " + num(s.target_fps));
  }
  at_least(s.crop_size, 1, "--crop_size");
  if (s.jitter_min < s.crop_size) {
    throw UsageError("--jitter_min must be >= --crop_size (" + std::to_string(s.crop_size) + "), got " +
                     std::to_string(s.jitter_min));
  }
  if (s.jitter_max < s.jitter_min) {
    throw UsageError("--jitter_max must be >= --jitter_min (" + std::to_string(s.jitter_min) + "), got " +
                     std::to_string(s.jitter_max));
  }
  if (!(s.hflip >= 0.0 && s.hflip <= 1.0)) throw UsageError("--hflip must be a probability in [0, 1], got " + num(s.hflip));
  at_least(s.test_num_clips, 1, "--test_num_clips");
  if (s.test_num_crops != 1 && s.test_num_crops != 3) {
    throw UsageError("--test_num_crops must be 1 or 3, got " + std::to_string(s.test_num_crops));
  }
}

double clip_size_frames(const ClipSampling& s, double fps) {
  return static_cast<double>(s.sampling_rate * s.num_frames) / s.target_fps * fps;
}

std::pair<double, double> clip_start_end(int64_t video_frames, double clip_size, int64_t clip_idx, int64_t num_clips,
                                         Rng& rng) {
  if (num_clips < 1 || clip_idx < -1 || clip_idx >= num_clips) {
    throw RuntimeError("clip_start_end: clip_idx " + std::to_string(clip_idx) + " is not -1 or in [0, " +
                       std::to_string(num_clips) + ")");
  }
  const double delta = std::max(static_cast<double>(video_frames) - clip_size, 0.0);
  const double start = clip_idx == -1 ? uniform(rng, 0.0, delta)
                                      : delta * static_cast<double>(clip_idx) / static_cast<double>(num_clips);
  return {start, start + clip_size - 1};
}

std::vector<float> torch_linspace_f32(double start, double end, int64_t num_samples) {
  if (num_samples < 0) throw RuntimeError("torch_linspace_f32: number of samples must be >= 0");
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(num_samples));
  if (num_samples == 0) return out;
  const float s = static_cast<float>(start), e = static_cast<float>(end);
  if (num_samples == 1) {
    out.push_back(s);
    return out;
  }
  const int64_t n = num_samples, half = n / 2;
  const float step = (e - s) / static_cast<float>(n - 1);
  // The scalar path: start + step * i below half, end - step * (n - 1 - i) from half on, each one
  // fused multiply-add (the AVX2 kernel is compiled with FMA contraction).
  auto two_sided = [&](int64_t i) {
    return i < half ? std::fma(step, static_cast<float>(i), s) : std::fma(-step, static_cast<float>(n - 1 - i), e);
  };
  // cpu_serial_kernel_vec: blocks of 2 x Vectorized<float>::size() (= 2 x 8) values as two
  // vectors arange(base, step) = base + k * step, then the scalar path for the rest.
  constexpr int64_t kVec = 8;
  int64_t i = 0;
  for (; i + 2 * kVec <= n; i += 2 * kVec) {
    for (int64_t v = i; v < i + 2 * kVec; v += kVec) {
      const float base = two_sided(v);
      out.push_back(base);
      for (int64_t k = 1; k < kVec; ++k) out.push_back(base + product(static_cast<float>(k), step));
    }
  }
  for (; i < n; ++i) out.push_back(two_sided(i));
  return out;
}

std::vector<int64_t> temporal_indices(double start, double end, int64_t num_samples, int64_t video_frames) {
  if (video_frames < 1) throw RuntimeError("temporal_indices: the video has no frames");
  const float hi = static_cast<float>(video_frames - 1);
  std::vector<int64_t> indices;
  for (float v : torch_linspace_f32(start, end, num_samples)) {
    const float c = std::min(std::max(v, 0.0f), hi);
    indices.push_back(static_cast<int64_t>(c));
  }
  return indices;
}

bool window_exceeds(int64_t video_frames, double end) { return end > static_cast<double>(video_frames - 1); }

at::Tensor short_side_scale(const at::Tensor& frames, int64_t size) {
  check_frames(frames, "short_side_scale");
  if (size < 1) throw RuntimeError("short_side_scale: size must be positive");
  const int64_t height = frames.size(2), width = frames.size(3);
  if ((width <= height && width == size) || (height <= width && height == size)) return frames;
  int64_t new_height = size, new_width = size;
  if (width < height) {
    new_height = static_cast<int64_t>(std::floor(static_cast<double>(height) / static_cast<double>(width) * size));
  } else {
    new_width = static_cast<int64_t>(std::floor(static_cast<double>(width) / static_cast<double>(height) * size));
  }
  const std::vector<int64_t> out_size{new_height, new_width};
  // Plain bilinear (no antialiasing), scales from the sizes: F.interpolate(size=..., mode="bilinear",
  // align_corners=False). [C, T] act as batch and channels.
  return at::upsample_bilinear2d(frames.to(at::kFloat).contiguous(), at::IntArrayRef(out_size),
                                 /*align_corners=*/false);
}

at::Tensor random_short_side_scale(const at::Tensor& frames, int64_t min_size, int64_t max_size, Rng& rng) {
  // Python's int(round(np.random.uniform(min, max))): half to even.
  const auto size = static_cast<int64_t>(
      std::nearbyint(uniform(rng, static_cast<double>(min_size), static_cast<double>(max_size))));
  return short_side_scale(frames, size);
}

at::Tensor random_crop(const at::Tensor& frames, int64_t size, Rng& rng) {
  check_frames(frames, "random_crop");
  const int64_t height = frames.size(2), width = frames.size(3);
  if (height == size && width == size) return frames;
  if (size < 1 || height < size || width < size) {
    throw RuntimeError("random_crop: " + std::to_string(height) + "x" + std::to_string(width) +
                       " frames are smaller than the crop " + std::to_string(size));
  }
  const int64_t y = height > size ? randint(rng, 0, height - size) : 0;
  const int64_t x = width > size ? randint(rng, 0, width - size) : 0;
  return frames.slice(2, y, y + size).slice(3, x, x + size);
}

at::Tensor horizontal_flip(const at::Tensor& frames, double p, Rng& rng) {
  check_frames(frames, "horizontal_flip");
  return bernoulli(rng, p) ? frames.flip({-1}) : frames;
}

at::Tensor uniform_crop(const at::Tensor& frames, int64_t size, int64_t spatial_idx) {
  check_frames(frames, "uniform_crop");
  if (spatial_idx < 0 || spatial_idx > 2) {
    throw RuntimeError("uniform_crop: spatial_idx must be 0, 1 or 2, got " + std::to_string(spatial_idx));
  }
  const int64_t height = frames.size(2), width = frames.size(3);
  if (size < 1 || height < size || width < size) {
    throw RuntimeError("uniform_crop: " + std::to_string(height) + "x" + std::to_string(width) +
                       " frames are smaller than the crop " + std::to_string(size));
  }
  int64_t y = (height - size + 1) / 2;  // ceil((height - size) / 2)
  int64_t x = (width - size + 1) / 2;
  if (height > width) {
    if (spatial_idx == 0) y = 0;
    if (spatial_idx == 2) y = height - size;
  } else {
    if (spatial_idx == 0) x = 0;
    if (spatial_idx == 2) x = width - size;
  }
  return frames.slice(2, y, y + size).slice(3, x, x + size);
}

namespace {

void check_view(const ClipSampling& s, int64_t view, const char* what) {
  const int64_t views = s.test_num_clips * s.test_num_crops;
  if (view < 0 || view >= views) {
    throw RuntimeError(std::string(what) + ": view " + std::to_string(view) + " is not in [0, " + std::to_string(views) +
                       ")");
  }
}

void check_window_frames(const at::Tensor& frames, const ClipSampling& s, const char* what) {
  check_frames(frames, what);
  if (frames.scalar_type() != at::kByte || frames.size(1) != s.num_frames) {
    throw RuntimeError(std::string(what) + ": expected uint8 [C, " + std::to_string(s.num_frames) + ", H, W] frames");
  }
}

}  // namespace

ClipWindow train_clip_window(int64_t video_frames, double fps, const ClipSampling& s, Rng& rng) {
  validate(s);
  if (video_frames < 1) throw RuntimeError("train_clip_window: the video has no frames");
  if (!std::isfinite(fps) || fps <= 0) throw RuntimeError("train_clip_window: bad frame rate " + num(fps));
  const auto [start, end] = clip_start_end(video_frames, clip_size_frames(s, fps), -1, 1, rng);
  return ClipWindow{temporal_indices(start, end, s.num_frames, video_frames), window_exceeds(video_frames, end)};
}

ClipWindow test_clip_window(int64_t video_frames, double fps, const ClipSampling& s, int64_t view) {
  validate(s);
  check_view(s, view, "test_clip_window");
  if (video_frames < 1) throw RuntimeError("test_clip_window: the video has no frames");
  if (!std::isfinite(fps) || fps <= 0) throw RuntimeError("test_clip_window: bad frame rate " + num(fps));
  Rng unused(0);  // clip_idx >= 0 draws nothing
  const auto [start, end] =
      clip_start_end(video_frames, clip_size_frames(s, fps), view / s.test_num_crops, s.test_num_clips, unused);
  return ClipWindow{temporal_indices(start, end, s.num_frames, video_frames), window_exceeds(video_frames, end)};
}

at::Tensor train_clip_pixels(const at::Tensor& window_frames, const ClipSampling& s, Rng& rng) {
  validate(s);
  check_window_frames(window_frames, s, "train_clip_pixels");
  at::Tensor x = window_frames.to(at::kFloat).div_(255.0);
  x = random_short_side_scale(x, s.jitter_min, s.jitter_max, rng);
  x = random_crop(x, s.crop_size, rng);
  x = horizontal_flip(x, s.hflip, rng);
  return x.contiguous();
}

at::Tensor test_clip_pixels(const at::Tensor& window_frames, const ClipSampling& s, int64_t view) {
  validate(s);
  check_view(s, view, "test_clip_pixels");
  check_window_frames(window_frames, s, "test_clip_pixels");
  const int64_t spatial_idx = s.test_num_crops > 1 ? view % s.test_num_crops : 1;
  at::Tensor x = window_frames.to(at::kFloat).div_(255.0);
  x = short_side_scale(x, s.test_num_crops > 1 ? s.crop_size : s.jitter_min);
  return uniform_crop(x, s.crop_size, spatial_idx).contiguous();
}

at::Tensor select_clip_frames(const at::Tensor& frames, const std::vector<int64_t>& indices) {
  const at::Tensor index = at::tensor(at::ArrayRef<int64_t>(indices), at::TensorOptions().dtype(at::kLong));
  return frames.index_select(1, index);
}

SampledClip sample_train_clip(const VideoClip& clip, const ClipSampling& s, Rng& rng) {
  validate(s);
  check_clip(clip, "sample_train_clip");
  const ClipWindow window = train_clip_window(clip.frames.size(1), clip.fps, s, rng);
  return SampledClip{train_clip_pixels(select_clip_frames(clip.frames, window.indices), s, rng), window.padded};
}

SampledClip sample_test_clip(const VideoClip& clip, const ClipSampling& s, int64_t view) {
  validate(s);
  check_clip(clip, "sample_test_clip");
  check_view(s, view, "sample_test_clip");
  const ClipWindow window = test_clip_window(clip.frames.size(1), clip.fps, s, view);
  return SampledClip{test_clip_pixels(select_clip_frames(clip.frames, window.indices), s, view), window.padded};
}

}  // namespace sparsevit::data
