#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstring>
#include <set>
#include <string>

#include "data/video_sampling.h"
#include "golden/video_sampling_golden.inc"
#include "util/errors.h"

namespace sparsevit::data {
namespace {

// A uint8 [C, T, H, W] clip whose frame t is filled with the value t (mod 256) in every pixel.
VideoClip numbered_clip(int64_t c, int64_t t, int64_t h, int64_t w, double fps = 30.0) {
  at::Tensor f = at::arange(t, at::kLong).remainder(256).to(at::kByte).view({1, t, 1, 1}).expand({c, t, h, w});
  return VideoClip{f.contiguous(), fps};
}

// A uint8 [C, T, H, W] clip with the value of each pixel its column x (so crops and flips show).
VideoClip column_clip(int64_t c, int64_t t, int64_t h, int64_t w, double fps = 30.0) {
  at::Tensor f = at::arange(w, at::kLong).to(at::kByte).view({1, 1, 1, w}).expand({c, t, h, w});
  return VideoClip{f.contiguous(), fps};
}

at::Tensor from_golden(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  return at::from_blob(const_cast<float*>(values.data()), shape, at::kFloat).clone();
}

TEST(VideoSampling, GoldenTemporalWindows) {
  for (const auto& g : golden::kTemporalCases) {
    SCOPED_TRACE("video " + std::to_string(g.video_frames) + " fps " + std::to_string(g.fps) + " frames " +
                 std::to_string(g.num_frames) + "x" + std::to_string(g.sampling_rate) + " clip " +
                 std::to_string(g.clip_idx) + "/" + std::to_string(g.num_clips));
    ClipSampling s;
    s.num_frames = g.num_frames;
    s.sampling_rate = g.sampling_rate;
    s.target_fps = golden::kTargetFps;
    const double clip_size = clip_size_frames(s, g.fps);
    EXPECT_EQ(clip_size, g.clip_size);
    Rng rng(1);
    const Rng before = rng;
    const auto [start, end] = clip_start_end(g.video_frames, clip_size, g.clip_idx, g.num_clips, rng);
    EXPECT_EQ(start, g.start);
    EXPECT_EQ(end, g.end);
    EXPECT_TRUE(rng == before) << "a test window drew from the generator";
    EXPECT_EQ(temporal_indices(start, end, g.num_frames, g.video_frames), g.indices);
    EXPECT_EQ(window_exceeds(g.video_frames, end), g.padded);
  }
}

TEST(VideoSampling, GoldenTorchLinspaceBitForBit) {
  for (const auto& g : golden::kLinspaceCases) {
    const std::vector<float> v = torch_linspace_f32(g.start, g.end, g.steps);
    ASSERT_EQ(v.size(), g.values.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      EXPECT_EQ(std::memcmp(&v[i], &g.values[i], sizeof(float)), 0)
          << "linspace(" << g.start << ", " << g.end << ", " << g.steps << ")[" << i << "] = " << v[i]
          << ", torch " << g.values[i];
    }
  }
  EXPECT_TRUE(torch_linspace_f32(1.0, 2.0, 0).empty());
}

TEST(VideoSampling, GoldenSpatialOps) {
  const at::Tensor landscape = from_golden(golden::kLandscapeValues, golden::kLandscapeShape);
  const at::Tensor portrait = from_golden(golden::kPortraitValues, golden::kPortraitShape);
  for (const auto& g : golden::kSpatialCases) {
    SCOPED_TRACE(std::string(g.input) + " " + g.op + " " + std::to_string(g.size) + " " + std::to_string(g.spatial_idx));
    const at::Tensor& x = std::strcmp(g.input, "kLandscape") == 0 ? landscape : portrait;
    const at::Tensor y = std::strcmp(g.op, "scale") == 0 ? short_side_scale(x, g.size) : uniform_crop(x, g.size, g.spatial_idx);
    ASSERT_EQ(y.sizes(), at::IntArrayRef(g.shape));
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    EXPECT_LE((y - from_golden(g.values, g.shape)).abs().max().item<double>(), 1e-6);
  }
}

TEST(VideoSampling, GoldenKineticsTestViews) {
  const int64_t n = golden::kViewClipShape[0] * golden::kViewClipShape[1] * golden::kViewClipShape[2] *
                    golden::kViewClipShape[3];
  const at::Tensor u8 = (at::arange(n, at::kLong) * 73).remainder(256).to(at::kByte).view(golden::kViewClipShape);
  const VideoClip clip{u8, golden::kViewClipFps};
  for (const auto& g : golden::kTestViewCases) {
    SCOPED_TRACE(std::string(g.config) + " view " + std::to_string(g.view));
    ClipSampling s;
    s.num_frames = g.num_frames;
    s.sampling_rate = g.sampling_rate;
    s.jitter_min = g.jitter_min;
    s.jitter_max = g.jitter_min;
    s.crop_size = g.crop_size;
    s.test_num_clips = g.test_num_clips;
    s.test_num_crops = g.test_num_crops;
    const SampledClip out = sample_test_clip(clip, s, g.view);
    ASSERT_EQ(out.frames.sizes(), at::IntArrayRef(g.shape));
    EXPECT_EQ(out.padded, g.padded);
    EXPECT_LE((out.frames - from_golden(g.values, g.shape)).abs().max().item<double>(), 1e-6);
  }
}

TEST(VideoSampling, ClipSizeFollowsTheFrameRate) {
  ClipSampling s;  // 8 x 8 at 30 fps
  EXPECT_DOUBLE_EQ(clip_size_frames(s, 30.0), 64.0);
  EXPECT_DOUBLE_EQ(clip_size_frames(s, 60.0), 128.0);
  EXPECT_NEAR(clip_size_frames(s, 25.0), 64.0 * 25.0 / 30.0, 1e-12);
}

TEST(VideoSampling, RandomWindowStartIsInRangeAndReproducible) {
  Rng rng(42);
  double lo = 1e9, hi = -1;
  for (int i = 0; i < 2000; ++i) {
    const auto [start, end] = clip_start_end(300, 64.0, -1, 1, rng);
    ASSERT_GE(start, 0.0);
    ASSERT_LE(start, 236.0);
    EXPECT_DOUBLE_EQ(end, start + 63.0);
    lo = std::min(lo, start);
    hi = std::max(hi, start);
  }
  EXPECT_LT(lo, 5.0);  // the draws spread over [0, delta]
  EXPECT_GT(hi, 231.0);
  Rng a(7), b(7);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(clip_start_end(300, 64.0, -1, 1, a), clip_start_end(300, 64.0, -1, 1, b));
  // A short video: delta 0, the window starts at 0 (and still takes its draw).
  Rng c(3);
  const Rng before = c;
  EXPECT_EQ(clip_start_end(40, 64.0, -1, 1, c), (std::pair<double, double>(0.0, 63.0)));
  EXPECT_FALSE(c == before);
  EXPECT_THROW(clip_start_end(40, 64.0, 3, 3, c), RuntimeError);
  EXPECT_THROW(clip_start_end(40, 64.0, -2, 3, c), RuntimeError);
}

TEST(VideoSampling, TrainClipShapesRangeAndReproducibility) {
  ClipSampling s;
  s.num_frames = 4;
  s.sampling_rate = 2;
  s.jitter_min = 12;
  s.jitter_max = 20;
  s.crop_size = 10;
  const VideoClip clip = numbered_clip(3, 30, 16, 24);
  Rng a(5), b(5);
  for (int i = 0; i < 20; ++i) {
    const SampledClip x = sample_train_clip(clip, s, a);
    const SampledClip y = sample_train_clip(clip, s, b);
    ASSERT_EQ(x.frames.sizes(), (at::IntArrayRef{3, 4, 10, 10}));
    EXPECT_EQ(x.frames.scalar_type(), at::kFloat);
    EXPECT_TRUE(x.frames.is_contiguous());
    EXPECT_TRUE(at::equal(x.frames, y.frames));
    EXPECT_FALSE(x.padded);  // an 8-frame window in 30 frames
    EXPECT_GE(x.frames.min().item<double>(), 0.0);
    EXPECT_LE(x.frames.max().item<double>(), 1.0);
    // Every frame is constant (frame t holds t / 255), so resizing keeps it: the first and last
    // sampled frames are the ends of the 8-frame window, 7 frames apart.
    const at::Tensor firsts = x.frames.select(3, 0).select(2, 0).select(0, 0) * 255.0;
    const double f0 = std::round(firsts[0].item<double>());
    EXPECT_LE(f0, 22.0);
    EXPECT_NEAR(firsts[3].item<double>() - f0, 7.0, 1e-3);
  }
  // A grey-scale clip keeps its single channel.
  Rng c(1);
  EXPECT_EQ(sample_train_clip(numbered_clip(1, 30, 16, 24), s, c).frames.sizes(), (at::IntArrayRef{1, 4, 10, 10}));
}

TEST(VideoSampling, TrainDrawOrder) {
  // window start, scale size, crop y, crop x, flip: replayed by hand from the same seed.
  ClipSampling s;
  s.num_frames = 4;
  s.sampling_rate = 2;
  s.jitter_min = 12;
  s.jitter_max = 20;
  s.crop_size = 10;
  s.hflip = 0.5;
  const VideoClip clip = column_clip(3, 30, 16, 24);
  for (uint64_t seed = 0; seed < 10; ++seed) {
    Rng rng(seed), replay(seed);
    const SampledClip out = sample_train_clip(clip, s, rng);
    const double start = uniform(replay, 0.0, 30.0 - 8.0);
    (void)start;
    const auto size = static_cast<int64_t>(std::nearbyint(uniform(replay, 12.0, 20.0)));
    const int64_t width = static_cast<int64_t>(std::floor(24.0 / 16.0 * static_cast<double>(size)));
    const int64_t y = randint(replay, 0, size - 10);
    (void)y;
    const int64_t x = randint(replay, 0, width - 10);
    const bool flip = bernoulli(replay, 0.5);
    EXPECT_TRUE(rng == replay) << "seed " << seed;
    // The output is the scaled column ramp from x on (reversed when flipped).
    at::Tensor ramp = short_side_scale(column_clip(1, 1, 16, 24).frames.to(at::kFloat).div(255.0), size)
                          .slice(3, x, x + 10)
                          .select(2, 0)
                          .reshape({10});
    if (flip) ramp = ramp.flip({0});
    EXPECT_TRUE(at::allclose(out.frames[0][0][0], ramp)) << "seed " << seed;
  }
}

TEST(VideoSampling, FlipProbabilityZeroAndOne) {
  ClipSampling s;
  s.num_frames = 2;
  s.sampling_rate = 1;
  s.jitter_min = s.jitter_max = s.crop_size = 8;  // no scaling, no crop: only the flip acts
  const VideoClip clip = column_clip(1, 4, 8, 8);
  const at::Tensor ramp = at::arange(8, at::kFloat).div(255.0);
  Rng rng(9);
  s.hflip = 0.0;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(at::allclose(sample_train_clip(clip, s, rng).frames[0][0][0], ramp));
  s.hflip = 1.0;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(at::allclose(sample_train_clip(clip, s, rng).frames[0][0][0], ramp.flip({0})));
  const at::Tensor f = at::rand({1, 1, 2, 3});
  Rng r0(1), r1(1);
  const Rng before = r0;
  EXPECT_TRUE(at::equal(horizontal_flip(f, 0.0, r0), f));
  EXPECT_TRUE(at::equal(horizontal_flip(f, 1.0, r1), f.flip({-1})));
  EXPECT_TRUE(r0 == before && r1 == before);  // certain outcomes draw nothing
}

TEST(VideoSampling, ShortVideosArePaddedWithTheLastFrame) {
  ClipSampling s;  // a 64-frame window
  const VideoClip clip = numbered_clip(3, 20, 8, 8);
  s.jitter_min = s.jitter_max = s.crop_size = 8;
  Rng rng(2);
  const SampledClip train = sample_train_clip(clip, s, rng);
  EXPECT_TRUE(train.padded);
  const at::Tensor frame_ids = (train.frames.select(3, 0).select(2, 0).select(0, 0) * 255.0).round();
  // linspace(0, 63, 8) = 0, 9, 18, 27, ... clamped to 19.
  EXPECT_TRUE(at::equal(frame_ids.to(at::kLong), at::tensor(std::vector<int64_t>{0, 9, 18, 19, 19, 19, 19, 19})));
  const SampledClip test = sample_test_clip(clip, s, 0);
  EXPECT_TRUE(test.padded);
  EXPECT_FALSE(sample_test_clip(numbered_clip(3, 64, 8, 8), s, 0).padded);
  EXPECT_TRUE(sample_test_clip(numbered_clip(3, 63, 8, 8), s, 0).padded);
  EXPECT_FALSE(window_exceeds(64, 63.0));
  EXPECT_TRUE(window_exceeds(64, 63.5));
  // A lower frame rate shortens the window in source frames: 64 * 15 / 30 = 32 frames fit in 40.
  EXPECT_FALSE(sample_test_clip(numbered_clip(3, 40, 8, 8, 15.0), s, 0).padded);
}

TEST(VideoSampling, TestViewsCoverTheThreeCropsAndTheClips) {
  ClipSampling s;
  s.num_frames = 2;
  s.sampling_rate = 1;
  s.jitter_min = s.jitter_max = 10;
  s.crop_size = 4;
  s.test_num_clips = 2;
  s.test_num_crops = 3;
  // Landscape 4 x 10 frames: crops at x = 0, 3, 6 (no scaling: the short side is the crop size).
  const VideoClip wide = column_clip(3, 10, 4, 10);
  std::vector<double> lefts;
  for (int64_t view = 0; view < 6; ++view) {
    const SampledClip out = sample_test_clip(wide, s, view);
    ASSERT_EQ(out.frames.sizes(), (at::IntArrayRef{3, 2, 4, 4}));
    lefts.push_back(std::round(out.frames[0][0][0][0].item<double>() * 255.0));
  }
  EXPECT_EQ(lefts, (std::vector<double>{0, 3, 6, 0, 3, 6}));
  // Portrait 10 x 4: top / centre / bottom, rows 0, 3, 6.
  const at::Tensor rows = at::arange(10, at::kLong).to(at::kByte).view({1, 1, 10, 1}).expand({3, 10, 10, 4}).contiguous();
  std::vector<double> tops;
  for (int64_t view = 0; view < 3; ++view) {
    tops.push_back(std::round(sample_test_clip(VideoClip{rows, 30.0}, s, view).frames[0][0][0][0].item<double>() * 255.0));
  }
  EXPECT_EQ(tops, (std::vector<double>{0, 3, 6}));
  // Temporal views: clip_idx = view / 3 over 2 uniform windows of 2 frames in 10: starts 0 and 4.
  const VideoClip numbered = numbered_clip(3, 10, 4, 10);
  EXPECT_NEAR(sample_test_clip(numbered, s, 2).frames[0][0][0][0].item<double>() * 255.0, 0.0, 1e-3);
  EXPECT_NEAR(sample_test_clip(numbered, s, 3).frames[0][0][0][0].item<double>() * 255.0, 4.0, 1e-3);
  EXPECT_THROW(sample_test_clip(wide, s, 6), RuntimeError);
  EXPECT_THROW(sample_test_clip(wide, s, -1), RuntimeError);
  // One crop: the centre, the short side scaled to jitter_min first (kinetics.py).
  s.test_num_crops = 1;
  s.jitter_min = s.jitter_max = 4;
  EXPECT_NEAR(sample_test_clip(wide, s, 1).frames[0][0][0][0].item<double>() * 255.0, 3.0, 1e-3);
}

TEST(VideoSampling, UniformCropOffsets) {
  const at::Tensor wide = at::arange(11, at::kFloat).view({1, 1, 1, 11}).expand({1, 1, 7, 11});
  EXPECT_EQ(uniform_crop(wide, 6, 0)[0][0][0][0].item<float>(), 0.0f);
  EXPECT_EQ(uniform_crop(wide, 6, 1)[0][0][0][0].item<float>(), 3.0f);  // ceil(5 / 2)
  EXPECT_EQ(uniform_crop(wide, 6, 2)[0][0][0][0].item<float>(), 5.0f);
  EXPECT_THROW(uniform_crop(wide, 6, 3), RuntimeError);
  EXPECT_THROW(uniform_crop(wide, 8, 1), RuntimeError);
  Rng rng(1);
  EXPECT_THROW(random_crop(wide, 8, rng), RuntimeError);
  std::set<int64_t> xs;
  for (int i = 0; i < 200; ++i) xs.insert(static_cast<int64_t>(random_crop(wide, 6, rng)[0][0][0][0].item<float>()));
  EXPECT_EQ(xs, (std::set<int64_t>{0, 1, 2, 3, 4}));  // randint(0, 11 - 6): the last offset is never drawn
}

TEST(VideoSampling, ShortSideScaleSizes) {
  const at::Tensor f = at::rand({3, 2, 240, 320});
  EXPECT_EQ(short_side_scale(f, 256).sizes(), (at::IntArrayRef{3, 2, 256, 341}));
  EXPECT_EQ(short_side_scale(f.transpose(2, 3), 256).sizes(), (at::IntArrayRef{3, 2, 341, 256}));
  EXPECT_TRUE(short_side_scale(f, 240).is_same(f));
  Rng rng(4);
  for (int i = 0; i < 10; ++i) {
    const at::Tensor y = random_short_side_scale(f, 256, 320, rng);
    EXPECT_GE(y.size(2), 256);
    EXPECT_LE(y.size(2), 320);
  }
}

TEST(VideoSampling, ValidateNamesTheFlag) {
  auto expect_usage = [](ClipSampling s, const std::string& flag) {
    try {
      validate(s);
      ADD_FAILURE() << "expected a UsageError naming " << flag;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(validate(ClipSampling{}));
  ClipSampling s;
  s.num_frames = 0;
  expect_usage(s, "--num_frames");
  s = {};
  s.sampling_rate = 0;
  expect_usage(s, "--sampling_rate");
  s = {};
  s.target_fps = 0;
  expect_usage(s, "--target_fps");
  s = {};
  s.crop_size = 0;
  expect_usage(s, "--crop_size");
  s = {};
  s.jitter_min = 200;
  expect_usage(s, "--jitter_min");
  s = {};
  s.jitter_max = 255;
  expect_usage(s, "--jitter_max");
  s = {};
  s.hflip = 1.5;
  expect_usage(s, "--hflip");
  s = {};
  s.test_num_clips = 0;
  expect_usage(s, "--test_num_clips");
  s = {};
  s.test_num_crops = 2;
  expect_usage(s, "--test_num_crops");
  // The pipelines validate too, and refuse a bad clip.
  Rng rng(1);
  EXPECT_THROW(sample_train_clip(numbered_clip(3, 4, 8, 8), s, rng), UsageError);
  EXPECT_THROW(sample_test_clip(VideoClip{at::zeros({3, 4, 8, 8}), 30.0}, ClipSampling{}, 0), RuntimeError);
  EXPECT_THROW(sample_test_clip(VideoClip{at::zeros({3, 0, 8, 8}, at::kByte), 30.0}, ClipSampling{}, 0), RuntimeError);
  EXPECT_THROW(sample_test_clip(numbered_clip(3, 4, 8, 8, 0.0), ClipSampling{}, 0), RuntimeError);
}

}  // namespace
}  // namespace sparsevit::data
