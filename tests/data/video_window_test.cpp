// Windowed video reading (data/video_window.h, decode_video_frames, read_frame_folder_frames and
// the clip dataset over them): a 320-frame clip written by the test in each codec / container
// pair Debian's FFmpeg encodes, every frame carrying its own index as a row of black / white
// blocks, so that a window shifted by one frame is caught twice over: against the whole
// decode's frames at the same indices, and against the index each frame shows.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "data/image_codec.h"
#include "data/video_clip_dataset.h"
#include "data/video_decoder.h"
#include "data/video_encoder.h"
#include "data/video_list_dataset.h"
#include "data/video_sampling.h"
#include "data_test_util.h"
#include "util/errors.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using testing::read_string;
using testing::write_string;
namespace fs = std::filesystem;

constexpr int64_t kFrames = 320, kFrameHeight = 48, kFrameWidth = 96;
constexpr int64_t kBits = 10, kBlock = 8;  // frame index bits, one 8 x 8 block each, in the top row

// Frame t: the top row of blocks spells t in binary (bit b: block b white / black), the rest a
// smooth gradient that moves with t, so the codecs see ordinary motion.
at::Tensor index_frames(int64_t channels, int64_t count) {
  at::Tensor frames = at::empty({channels, count, kFrameHeight, kFrameWidth}, at::kByte);
  auto a = frames.accessor<uint8_t, 4>();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < count; ++t)
      for (int64_t y = 0; y < kFrameHeight; ++y)
        for (int64_t x = 0; x < kFrameWidth; ++x) {
          const int64_t bit = x / kBlock;
          a[c][t][y][x] = y < kBlock && bit < kBits
                              ? static_cast<uint8_t>((t >> bit) & 1 ? 235 : 16)
                              : static_cast<uint8_t>(40 + (x + 2 * t) % 96 + y + 10 * c);
        }
  return frames;
}

// The index frame t of uint8 [C, T, H, W] shows (channel 0, the centre of each block).
int64_t shown_index(const at::Tensor& frames, int64_t t) {
  int64_t index = 0;
  for (int64_t bit = 0; bit < kBits; ++bit)
    if (frames[0][t][kBlock / 2][bit * kBlock + kBlock / 2].item<int64_t>() > 128) index |= int64_t{1} << bit;
  return index;
}

struct WindowCodec {
  const char* codec;
  const char* extension;
  bool windowed;  // whether the container lets the window be decoded by seeking
};

// mp4 and avi index every frame and declare the count; Matroska declares none (whole decode).
// mpeg4 and libx264 have a keyframe every 12 frames (write_video_file's GOP), libx264 B-frames
// too; ffv1's frames depend on the previous ones within a GOP as well; mjpeg is all keyframes.
const WindowCodec kWindowCodecs[] = {{"mpeg4", ".mp4", true},  {"mpeg4", ".avi", true},   {"libx264", ".mp4", true},
                       {"libx264", ".mkv", false}, {"ffv1", ".avi", true}, {"ffv1", ".mkv", false},
                       {"mjpeg", ".avi", true}};

// A picker returning fixed indices, checking the frame count it is told.
FramePicker fixed(std::vector<int64_t> indices, int64_t expected_frames = kFrames) {
  return [indices, expected_frames](int64_t video_frames, double fps) {
    EXPECT_EQ(video_frames, expected_frames);
    EXPECT_NEAR(fps, 30.0, 1e-6);
    return indices;
  };
}

// FFmpeg's logged errors name the context's address ("[mov,mp4,... @ 0x55e9159be700]").
std::string without_addresses(const std::string& text) {
  return std::regex_replace(text, std::regex("@ 0x[0-9a-f]+"), "@ ADDRESS");
}

at::Tensor pick(const at::Tensor& frames, const std::vector<int64_t>& indices) {
  return select_clip_frames(frames, indices);
}

class VideoWindow : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const VideoClip rgb{index_frames(3, kFrames), 30.0};
    for (const WindowCodec& p : kWindowCodecs) {
      if (!has_video_encoder(p.codec)) continue;
      write_video_file(path(p), rgb, p.codec);
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const WindowCodec& p) { return *dir_ / (std::string(p.codec) + p.extension); }
  static TempDir* dir_;
};
TempDir* VideoWindow::dir_ = nullptr;

// Windows at the start, in the middle, across keyframes (every 12 frames), at the end, single
// frames, repeats, out of order; each against the whole decode and the index the frames show.
TEST_F(VideoWindow, WindowsEqualTheWholeDecodeAtTheSameIndicesInEveryCodecAndContainer) {
  const std::vector<std::vector<int64_t>> windows = {
      {0, 1, 2, 3, 4, 5, 6, 7},          // the start, no seek
      {0, 8, 16, 24, 32, 40, 48, 56},    // TimeSformer's 8 x 8 from the start
      {150, 158, 166, 174, 182, 190, 198, 206},  // the middle
      {10, 11, 12, 13},                  // across the keyframe at 12
      {23, 24, 25},                      // a keyframe in the middle of the window
      {24},                              // exactly a keyframe
      {199},                             // one frame, just before a keyframe
      {312, 313, 314, 315, 316, 317, 318, 319},  // the end: the last frame must be the last
      {300, 319, 319, 319},              // padding repeats the last frame
      {100, 100, 101, 99},               // repeats and any order
  };
  int tested = 0;
  for (const WindowCodec& p : kWindowCodecs) {
    if (!has_video_encoder(p.codec)) continue;
    ++tested;
    const std::string file = path(p);
    for (int64_t channels : {3, 1}) {
      const at::Tensor whole = decode_video_file(file, channels).frames;
      ASSERT_EQ(whole.size(1), kFrames) << file;
      for (const auto& window : windows) {
        SCOPED_TRACE(file + " channels " + std::to_string(channels) + " window from " + std::to_string(window[0]));
        const PickedFrames got = decode_video_frames(file, channels, fixed(window));
        EXPECT_EQ(got.windowed, p.windowed);
        EXPECT_EQ(got.video_frames, kFrames);
        EXPECT_NEAR(got.fps, 30.0, 1e-6);
        ASSERT_EQ(got.frames.sizes(), (std::vector<int64_t>{channels, static_cast<int64_t>(window.size()), kFrameHeight, kFrameWidth}));
        EXPECT_TRUE(got.frames.is_contiguous());
        EXPECT_TRUE(at::equal(got.frames, pick(whole, window)));
        if (channels == 3) {
          for (std::size_t k = 0; k < window.size(); ++k) EXPECT_EQ(shown_index(got.frames, static_cast<int64_t>(k)), window[k]);
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "this FFmpeg build has none of the encoders";
}

// The comparison above catches a window shifted by one frame only if neighbouring frames differ
// after decoding: check that they do in every file, and that each shows its own index.
TEST_F(VideoWindow, NeighbouringFramesDifferAndShowTheirIndexSoAnOffByOneSeekFails) {
  for (const WindowCodec& p : kWindowCodecs) {
    if (!has_video_encoder(p.codec)) continue;
    SCOPED_TRACE(path(p));
    const at::Tensor whole = decode_video_file(path(p), 3).frames;
    for (int64_t t = 0; t < kFrames; ++t) {
      ASSERT_EQ(shown_index(whole, t), t);
      if (t > 0) {
        ASSERT_FALSE(at::equal(whole.select(1, t), whole.select(1, t - 1)));
      }
    }
    // One frame off, in either direction, is a different result.
    const PickedFrames got = decode_video_frames(path(p), 3, fixed({150, 151}));
    EXPECT_FALSE(at::equal(got.frames, pick(whole, {149, 150})));
    EXPECT_FALSE(at::equal(got.frames, pick(whole, {151, 152})));
  }
}

TEST_F(VideoWindow, BytesInMemoryDecodeLikeTheFile) {
  const WindowCodec p{"mpeg4", ".mp4", true};
  if (!has_video_encoder(p.codec)) GTEST_SKIP();
  const PickedFrames file = decode_video_frames(path(p), 3, fixed({130, 138, 146}));
  const PickedFrames bytes = decode_video_bytes_frames(read_string(path(p)), 3, "clip.mp4", fixed({130, 138, 146}));
  EXPECT_TRUE(bytes.windowed);
  EXPECT_TRUE(at::equal(file.frames, bytes.frames));
}

// The sampling's own windows (data/video_sampling.h) through the decoder, a window longer than
// the video included: what the clip dataset asks for.
TEST_F(VideoWindow, SampledWindowsIncludingOneLongerThanTheVideo) {
  const WindowCodec p{"libx264", ".mp4", true};
  if (!has_video_encoder(p.codec)) GTEST_SKIP();
  const at::Tensor whole = decode_video_file(path(p), 3).frames;
  ClipSampling s;  // 8 x 8 at 30 fps: 64-frame windows
  ClipSampling longer = s;
  longer.sampling_rate = 48;  // 384 frames > 320: padded
  longer.test_num_clips = 3;
  for (const ClipSampling& sampling : {s, longer}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      Rng rng = make_rng(seed, RngStream::kSample, 0, 0);
      ClipWindow window;
      const PickedFrames got = decode_video_frames(path(p), 3, [&](int64_t frames, double fps) {
        window = train_clip_window(frames, fps, sampling, rng);
        return window.indices;
      });
      EXPECT_TRUE(got.windowed);
      EXPECT_EQ(window.padded, sampling.sampling_rate == 48);
      EXPECT_TRUE(at::equal(got.frames, pick(whole, window.indices)));
    }
    for (int64_t view = 0; view < sampling.test_num_clips; ++view) {
      ClipWindow window;
      const PickedFrames got = decode_video_frames(path(p), 3, [&](int64_t frames, double fps) {
        window = test_clip_window(frames, fps, sampling, view);
        return window.indices;
      });
      EXPECT_TRUE(at::equal(got.frames, pick(whole, window.indices)));
      if (sampling.sampling_rate == 48) {
        EXPECT_EQ(window.indices.back(), kFrames - 1);
      }
    }
  }
}

// Cut files: the windowed read gives the whole decode's outcome (the same frames, or an error)
// whatever the window, since a cut container loses its index or points past its end.
TEST_F(VideoWindow, CutFilesGiveTheWholeDecodesOutcome) {
  TempDir dir;
  for (const WindowCodec& p : kWindowCodecs) {
    if (!has_video_encoder(p.codec)) continue;
    const std::string bytes = read_string(path(p));
    for (double fraction : {0.3, 0.6, 0.9, 0.99}) {
      const std::string cut = bytes.substr(0, static_cast<std::size_t>(static_cast<double>(bytes.size()) * fraction));
      SCOPED_TRACE(path(p) + " cut at " + std::to_string(fraction));
      std::string whole_error;
      at::Tensor whole;
      try {
        whole = decode_video_bytes(cut, 3, "cut").frames;
      } catch (const RuntimeError& e) {
        whole_error = e.what();
      }
      for (const std::vector<int64_t>& window : {std::vector<int64_t>{0, 1}, std::vector<int64_t>{50, 51}}) {
        try {
          const PickedFrames got = decode_video_bytes_frames(cut, 3, "cut", [&](int64_t frames, double) {
            std::vector<int64_t> clamped;
            for (int64_t i : window) clamped.push_back(std::min(i, frames - 1));
            return clamped;
          });
          ASSERT_EQ(whole_error, "") << "the whole decode failed, the window did not";
          if (!got.windowed) {
            EXPECT_EQ(got.video_frames, whole.size(1));
          }
          std::vector<int64_t> clamped;
          for (int64_t i : window) clamped.push_back(std::min(i, whole.size(1) - 1));
          EXPECT_TRUE(at::equal(got.frames, pick(whole, clamped)));
        } catch (const RuntimeError& e) {
          EXPECT_EQ(without_addresses(e.what()), without_addresses(whole_error));
        }
      }
    }
  }
}

TEST_F(VideoWindow, PickerErrorsAndDecoderErrorsNameTheFile) {
  const WindowCodec p{"mpeg4", ".avi", true};
  if (!has_video_encoder(p.codec)) GTEST_SKIP();
  expect_error<RuntimeError>([&] { decode_video_frames(path(p), 3, fixed({kFrames})); },
                             {path(p), "chose frame 320 of 320"});
  expect_error<RuntimeError>([&] { decode_video_frames(path(p), 3, fixed({-1})); }, {path(p), "chose frame -1"});
  expect_error<RuntimeError>([&] { decode_video_frames(path(p), 3, fixed({})); }, {path(p), "chose no frame"});
  expect_error<UsageError>([&] { decode_video_frames(path(p), 2, fixed({0})); }, {"channels must be 1 (gray) or 3"});
  expect_error<RuntimeError>([&] { decode_video_frames(*dir_ / "missing.mp4", 3, fixed({0})); }, {"no such file"});
  TempDir dir;
  write_string(dir / "text.mp4", "not a video at all, just some text\n");
  expect_error<RuntimeError>([&] { decode_video_frames(dir / "text.mp4", 3, fixed({0})); },
                             {dir / "text.mp4", "not a readable video file"});
}

// ---------------------------------------------------------------- frame folders

TEST(VideoWindowFrameFolder, ReadsOnlyThePickedFramesAndTheFirst) {
  TempDir dir;
  fs::create_directories(dir / "f");
  const at::Tensor frames = index_frames(3, 40);
  for (int64_t t = 0; t < 40; ++t) {
    Image image;
    image.width = kFrameWidth;
    image.height = kFrameHeight;
    image.channels = 3;
    const at::Tensor hwc = frames.select(1, t).permute({1, 2, 0}).contiguous();
    image.pixels.assign(hwc.data_ptr<uint8_t>(), hwc.data_ptr<uint8_t>() + hwc.numel());
    write_png(dir / ("f/frame_" + std::to_string(t + 1) + ".png"), image);
  }
  const std::vector<int64_t> window = {20, 22, 24, 24};
  const PickedFrames got = read_frame_folder_frames(dir / "f", 3, fixed(window, 40));
  EXPECT_TRUE(got.windowed);
  EXPECT_EQ(got.video_frames, 40);
  EXPECT_EQ(got.fps, 30.0);
  EXPECT_TRUE(at::equal(got.frames, pick(read_frame_folder(dir / "f", 3).frames, window)));
  EXPECT_TRUE(at::equal(got.frames, pick(frames, window)));  // PNG is lossless
  // A damaged frame outside the window is not read; one inside is an error naming it.
  write_string(dir / "f/frame_31.png", "not a png");
  EXPECT_TRUE(at::equal(read_frame_folder_frames(dir / "f", 3, fixed(window, 40)).frames, got.frames));
  expect_error<RuntimeError>([&] { read_frame_folder(dir / "f", 3); }, {dir / "f/frame_31.png"});
  expect_error<RuntimeError>([&] { read_frame_folder_frames(dir / "f", 3, fixed({30}, 40)); }, {dir / "f/frame_31.png"});
  // Sizes are checked against the folder's first frame, as the whole read does.
  Image small;
  small.width = 16;
  small.height = 16;
  small.channels = 3;
  small.pixels.assign(16 * 16 * 3, 0);
  write_png(dir / "f/frame_23.png", small);
  expect_error<RuntimeError>([&] { read_frame_folder_frames(dir / "f", 3, fixed(window, 40)); },
                             {dir / "f/frame_23.png", "16x16", "the folder's first frame 96x48"});
}

// ---------------------------------------------------------------- the clip dataset

// Train and test views through the windowed reads equal those through whole clips (today's
// path), for the same seeds: mp4 and avi windows, an mkv decoded whole, a frame folder, and a
// video shorter than the window (padded).
TEST_F(VideoWindow, ClipDatasetViewsEqualThoseOfWholeClips) {
  const char* needed[] = {"mpeg4", "libx264", "ffv1"};
  for (const char* codec : needed)
    if (!has_video_encoder(codec)) GTEST_SKIP() << "this FFmpeg build lacks " << codec;
  TempDir dir;
  write_video_file(dir / "short.mp4", VideoClip{index_frames(3, 40), 25.0}, "mpeg4");  // 40 < the 54-frame window at 25 fps
  fs::create_directories(dir / "frames");
  const at::Tensor folder = index_frames(3, 70);
  for (int64_t t = 0; t < 70; ++t) {
    Image image;
    image.width = kFrameWidth;
    image.height = kFrameHeight;
    image.channels = 3;
    const at::Tensor hwc = folder.select(1, t).permute({1, 2, 0}).contiguous();
    image.pixels.assign(hwc.data_ptr<uint8_t>(), hwc.data_ptr<uint8_t>() + hwc.numel());
    write_png(dir / ("frames/" + std::to_string(t) + ".png"), image);
  }
  const std::string list = path({"libx264", ".mp4", true}) + " 0\n" + path({"mpeg4", ".avi", true}) + " 1\n" +
                           path({"ffv1", ".mkv", false}) + " 2\nshort.mp4 3\nframes 4\n";
  write_string(dir / "train.csv", list);
  write_string(dir / "test.csv", list);
  ClipSampling s;  // TimeSformer's 8 x 8, with small frames
  s.jitter_min = 56;
  s.jitter_max = 64;
  s.crop_size = 48;
  s.test_num_clips = 3;
  s.test_num_crops = 3;
  for (bool train : {true, false}) {
    SCOPED_TRACE(train ? "train" : "test");
    const auto videos = std::make_shared<VideoListDataset>(dir.path().string(), train);
    const VideoClipDataset windowed(videos, s, train);
    const VideoClipDataset whole(videos, s, train, /*windowed=*/false);
    ASSERT_EQ(windowed.size(), whole.size());
    const std::vector<uint64_t> seeds = train ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{1};
    for (int64_t i = 0; i < windowed.size(); ++i)
      for (uint64_t seed : seeds) {
        SCOPED_TRACE("sample " + std::to_string(i) + " seed " + std::to_string(seed));
        Rng a = make_rng(seed, RngStream::kSample, 0, i), b = a;
        const Sample x = windowed.get(i, a), y = whole.get(i, b);
        EXPECT_EQ(x.label, y.label);
        ASSERT_EQ(x.image.sizes(), (std::vector<int64_t>{3, 8, 48, 48}));
        EXPECT_TRUE(at::equal(x.image, y.image));
        EXPECT_EQ(a(), b());  // the same number of draws
      }
    EXPECT_EQ(windowed.padded_clips(), whole.padded_clips());
    const int64_t reads = train ? 3 : 9;  // per video: 3 seeds of its 1 view, or its 9 views once
    EXPECT_EQ(windowed.padded_clips(), reads);  // short.mp4's samples
    // mp4, avi, short.mp4 and the folder are read as windows; the mkv whole.
    EXPECT_EQ(windowed.windowed_reads(), 4 * reads);
    EXPECT_EQ(whole.windowed_reads(), 0);
  }
}

}  // namespace
}  // namespace sparsevit::data
