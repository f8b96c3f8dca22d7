// FFmpeg video decoding and encoding (data/video_decoder.h, data/video_encoder.h): every clip is
// written by the test itself with write_video_file, in each codec / container pair Debian's
// FFmpeg can encode, then decoded back.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data/video_decoder.h"
#include "data/video_encoder.h"
#include "data_test_util.h"
#include "util/errors.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using testing::smooth_clip;
using testing::smooth_frames;
using testing::read_string;
using testing::write_string;
namespace fs = std::filesystem;

double mean_abs_error(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().mean().item<double>();
}

struct CodecContainer {
  const char* codec;
  const char* extension;
};

TEST(VideoDecoder, LosslessCodecsRoundTripBitExactlyInGrayAndRgb) {
  TempDir dir;
  const CodecContainer pairs[] = {{"ffv1", ".mkv"}, {"png", ".avi"}, {"rawvideo", ".avi"}, {"png", ".mov"}};
  for (const CodecContainer& p : pairs) {
    if (!has_video_encoder(p.codec)) continue;
    for (int64_t channels : {1, 3}) {
      SCOPED_TRACE(std::string(p.codec) + p.extension + " channels " + std::to_string(channels));
      // Odd sizes: 33 x 21.
      const VideoClip clip = smooth_clip(channels, 5, 21, 33, 25.0);
      const std::string path = dir / (std::string(p.codec) + std::to_string(channels) + p.extension);
      write_video_file(path, clip, p.codec);
      const VideoClip back = decode_video_file(path, channels);
      ASSERT_EQ(back.frames.sizes(), clip.frames.sizes());
      EXPECT_EQ(back.frames.scalar_type(), at::kByte);
      EXPECT_TRUE(back.frames.is_contiguous());
      EXPECT_TRUE(at::equal(back.frames, clip.frames));
      EXPECT_NEAR(back.fps, 25.0, 1e-3);
    }
  }
}

TEST(VideoDecoder, LossyCodecsDecodeCloseToTheOriginal) {
  TempDir dir;
  const CodecContainer pairs[] = {{"mpeg4", ".mp4"}, {"mjpeg", ".avi"}, {"libx264", ".mp4"}, {"mpeg2video", ".mkv"}};
  for (const CodecContainer& p : pairs) {
    if (!has_video_encoder(p.codec)) continue;
    for (int64_t channels : {1, 3}) {
      SCOPED_TRACE(std::string(p.codec) + p.extension + " channels " + std::to_string(channels));
      const VideoClip clip = smooth_clip(channels, 8, 48, 64, 30.0);
      const std::string path = dir / (std::string(p.codec) + std::to_string(channels) + p.extension);
      write_video_file(path, clip, p.codec);
      const VideoClip back = decode_video_file(path, channels);
      ASSERT_EQ(back.frames.sizes(), clip.frames.sizes());
      EXPECT_LT(mean_abs_error(back.frames, clip.frames), 2.0);  // measured: 0.45 .. 0.74
      EXPECT_NEAR(back.fps, 30.0, 1e-3);
    }
  }
}

TEST(VideoDecoder, ContainerDefaultCodecAndNtscFrameRate) {
  TempDir dir;
  const VideoClip clip = smooth_clip(3, 4, 32, 48, 30000.0 / 1001.0);
  const std::string path = dir / "default.avi";  // AVI's default: mpeg4
  write_video_file(path, clip);
  const VideoClip back = decode_video_file(path, 3);
  EXPECT_EQ(back.frames.size(1), 4);
  EXPECT_NEAR(back.fps, 29.97, 1e-2);
  EXPECT_EQ(probe_video_file(path).codec, "mpeg4");
}

TEST(VideoDecoder, GrayOutputOfAnRgbFileIsItsLuma) {
  TempDir dir;
  const VideoClip clip = smooth_clip(3, 3, 21, 33, 25.0);
  const std::string path = dir / "rgb.mkv";
  write_video_file(path, clip, "ffv1");
  const VideoClip gray = decode_video_file(path, 1);
  ASSERT_EQ(gray.frames.sizes(), (std::vector<int64_t>{1, 3, 21, 33}));
  const at::Tensor f = clip.frames.to(at::kFloat);
  const at::Tensor luma = 0.299 * f[0] + 0.587 * f[1] + 0.114 * f[2];
  EXPECT_LT((gray.frames[0].to(at::kFloat) - luma).abs().max().item<double>(), 3.0);
  // And a gray file read as RGB repeats its gray level in every channel.
  const VideoClip g = smooth_clip(1, 2, 8, 8, 25.0);
  write_video_file(dir / "gray.mkv", g, "ffv1");
  const VideoClip rgb = decode_video_file(dir / "gray.mkv", 3);
  for (int64_t c = 0; c < 3; ++c) EXPECT_TRUE(at::equal(rgb.frames[c], g.frames[0])) << c;
}

TEST(VideoDecoder, BytesInMemoryDecodeLikeTheFile) {
  TempDir dir;
  for (const CodecContainer& p : {CodecContainer{"ffv1", ".mkv"}, CodecContainer{"mpeg4", ".mp4"}, CodecContainer{"mjpeg", ".avi"}}) {
    if (!has_video_encoder(p.codec)) continue;
    SCOPED_TRACE(p.codec);
    const std::string path = dir / (std::string("clip") + p.extension);
    write_video_file(path, smooth_clip(3, 6, 24, 32, 25.0), p.codec);
    const VideoClip from_file = decode_video_file(path, 3);
    const VideoClip from_bytes = decode_video_bytes(read_string(path), 3, "memory");
    EXPECT_TRUE(at::equal(from_file.frames, from_bytes.frames));
    EXPECT_EQ(from_file.fps, from_bytes.fps);
  }
}

TEST(VideoDecoder, DecodersRunInParallelThreads) {
  // The data loader's workers decode at once; each decoder is independent and single-threaded.
  TempDir dir;
  const std::string mkv = dir / "a.mkv", mp4 = dir / "b.mp4";
  write_video_file(mkv, smooth_clip(3, 6, 24, 32, 25.0), "ffv1");
  write_video_file(mp4, smooth_clip(3, 6, 24, 32, 25.0), "mpeg4");
  const at::Tensor want_mkv = decode_video_file(mkv, 3).frames, want_mp4 = decode_video_file(mp4, 3).frames;
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int r = 0; r < 3; ++r)
        ok[i] += at::equal(decode_video_file(i % 2 ? mkv : mp4, 3).frames, i % 2 ? want_mkv : want_mp4);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, std::vector<int>(4, 3));
}

TEST(VideoDecoder, ProbeReportsSizeRateFramesAndCodec) {
  TempDir dir;
  write_video_file(dir / "a.mp4", smooth_clip(3, 7, 24, 40, 30.0), "mpeg4");
  VideoInfo info = probe_video_file(dir / "a.mp4");
  EXPECT_EQ(info.width, 40);
  EXPECT_EQ(info.height, 24);
  EXPECT_EQ(info.declared_frames, 7);
  EXPECT_NEAR(info.fps, 30.0, 1e-3);
  EXPECT_EQ(info.codec, "mpeg4");
  write_video_file(dir / "b.mkv", smooth_clip(1, 3, 21, 33, 25.0), "ffv1");
  info = probe_video_file(dir / "b.mkv");
  EXPECT_EQ(info.width, 33);
  EXPECT_EQ(info.height, 21);
  EXPECT_EQ(info.declared_frames, 0);  // Matroska does not declare a count
  EXPECT_NEAR(info.fps, 25.0, 1e-3);
  EXPECT_EQ(info.codec, "ffv1");
}

TEST(VideoDecoder, UnreadableFilesAreRuntimeErrorsNamingTheFile) {
  TempDir dir;
  const std::string missing = dir / "missing.mp4";
  expect_error<RuntimeError>([&] { decode_video_file(missing, 3); }, {missing, "no such file"});
  expect_error<RuntimeError>([&] { probe_video_file(missing); }, {missing, "no such file"});

  const std::string text = dir / "notes.mp4";
  write_string(text, "these are notes, not a video\n");
  expect_error<RuntimeError>([&] { decode_video_file(text, 3); }, {text, "not a readable video file"});
  expect_error<RuntimeError>([&] { decode_video_bytes(read_string(text), 3, "notes"); }, {"notes: not a readable video file"});

  const std::string empty = dir / "empty.avi";
  write_string(empty, "");
  expect_error<RuntimeError>([&] { decode_video_file(empty, 1); }, {empty, "empty"});

  expect_error<RuntimeError>([&] { decode_video_file(dir.path().string(), 1); }, {dir.path().string(), "directory"});
  expect_error<UsageError>([&] { decode_video_file(text, 2); }, {text, "channels"});
}

// A 16-bit PCM WAV, written by hand: audio only.
std::string wav_bytes() {
  std::string b;
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i))); };
  auto u16 = [&](uint16_t v) { for (int i = 0; i < 2; ++i) b.push_back(static_cast<char>(v >> (8 * i))); };
  const uint32_t samples = 800, rate = 8000;
  b += "RIFF";
  u32(36 + samples * 2);
  b += "WAVEfmt ";
  u32(16);
  u16(1);  // PCM
  u16(1);  // mono
  u32(rate);
  u32(rate * 2);
  u16(2);
  u16(16);
  b += "data";
  u32(samples * 2);
  for (uint32_t i = 0; i < samples; ++i) u16(static_cast<uint16_t>((i * 300) & 0x7fff));
  return b;
}

TEST(VideoDecoder, AudioOnlyFileHasNoVideoStream) {
  TempDir dir;
  const std::string path = dir / "tone.wav";
  write_string(path, wav_bytes());
  expect_error<RuntimeError>([&] { decode_video_file(path, 3); }, {path, "no video stream"});
  expect_error<RuntimeError>([&] { probe_video_file(path); }, {path, "no video stream"});
}

TEST(VideoDecoder, TruncatedFilesDecodeFewerFramesOrFailNamingTheFile) {
  TempDir dir;
  const CodecContainer pairs[] = {{"ffv1", ".mkv"}, {"mjpeg", ".avi"}, {"mpeg4", ".mp4"}, {"png", ".avi"}, {"mpeg4", ".mkv"}};
  for (const CodecContainer& p : pairs) {
    if (!has_video_encoder(p.codec)) continue;
    SCOPED_TRACE(std::string(p.codec) + p.extension);
    const std::string full = dir / (std::string("full_") + p.codec + p.extension);
    write_video_file(full, smooth_clip(3, 10, 24, 32, 25.0), p.codec);
    const std::string bytes = read_string(full);
    for (size_t cut : {bytes.size() / 2, bytes.size() - 1, size_t{100}}) {
      const std::string path = dir / (std::string("cut_") + p.codec + std::to_string(cut) + p.extension);
      write_string(path, bytes.substr(0, cut));
      try {
        const VideoClip clip = decode_video_file(path, 3);
        EXPECT_GE(clip.frames.size(1), 1);
        EXPECT_LE(clip.frames.size(1), 10);
        if (cut == bytes.size() / 2) {
          EXPECT_LT(clip.frames.size(1), 10);
        }
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      }
    }
  }
}

TEST(VideoDecoder, KnownTruncationOutcomes) {
  // What the FFmpeg 5.1 demuxers do with a file cut in half: AVI ends inside a frame's chunk (an
  // error), MP4 loses its index at the end (cannot be opened), Matroska drops the cut block.
  TempDir dir;
  // Noise, so that the frames' data outweighs the headers and indexes.
  VideoClip clip = smooth_clip(3, 10, 32, 48, 25.0);
  clip.frames = (clip.frames.to(at::kInt) * 7919 + at::arange(clip.frames.numel(), at::kInt).view_as(clip.frames) * 104729)
                    .remainder(251)
                    .to(at::kByte);
  auto cut_in_half = [&](const std::string& name, const char* codec) {
    const std::string full = dir / ("full_" + name);
    write_video_file(full, clip, codec);
    const std::string bytes = read_string(full);
    const std::string path = dir / name;
    write_string(path, bytes.substr(0, bytes.size() / 2));
    return path;
  };
  const std::string avi = cut_in_half("cut.avi", "mjpeg");
  expect_error<RuntimeError>([&] { decode_video_file(avi, 3); }, {avi + ": truncated or corrupt video", "after "});
  const std::string mp4 = cut_in_half("cut.mp4", "mpeg4");
  expect_error<RuntimeError>([&] { decode_video_file(mp4, 3); }, {mp4 + ": not a readable video file", "moov"});
  const std::string mkv = cut_in_half("cut.mkv", "ffv1");
  const VideoClip part = decode_video_file(mkv, 3);
  ASSERT_GE(part.frames.size(1), 1);
  ASSERT_LT(part.frames.size(1), 10);
  EXPECT_TRUE(at::equal(part.frames, clip.frames.narrow(1, 0, part.frames.size(1))));
}

TEST(VideoDecoder, CorruptMiddleIsACorruptVideoError) {
  // An MJPEG AVI whose second half is overwritten: the demuxer finds packets whose JPEG data is
  // garbage, or the decoder refuses them. Never a crash; an error names the file.
  TempDir dir;
  const std::string path = dir / "corrupt.avi";
  write_video_file(path, smooth_clip(3, 10, 24, 32, 25.0), "mjpeg");
  std::string bytes = read_string(path);
  for (size_t i = bytes.size() / 3; i < bytes.size() * 2 / 3; ++i) bytes[i] = static_cast<char>(i * 131);
  try {
    const VideoClip clip = decode_video_bytes(bytes, 3, "corrupt.avi");
    EXPECT_GE(clip.frames.size(1), 1);
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("corrupt.avi: ", 0), 0u) << e.what();
  }
}

TEST(VideoDecoder, DecodedBytesLimitIsEnforced) {
  TempDir dir;
  const std::string path = dir / "clip.mkv";
  write_video_file(path, smooth_clip(3, 4, 16, 16, 25.0), "ffv1");
  detail::set_max_decoded_bytes(3 * 16 * 16 * 2);  // two frames
  try {
    expect_error<RuntimeError>([&] { decode_video_file(path, 3); }, {path, "exceeds the limit", "after 2 frames"});
  } catch (...) {
    detail::set_max_decoded_bytes(int64_t{1} << 32);
    throw;
  }
  detail::set_max_decoded_bytes(int64_t{1} << 32);
  EXPECT_EQ(decode_video_file(path, 1).frames.size(1), 4);
}

TEST(VideoEncoder, BadClipsContainersAndCodecsAreUsageErrors) {
  TempDir dir;
  const VideoClip clip = smooth_clip(3, 2, 8, 8, 25.0);
  expect_error<UsageError>([&] { write_video_file(dir / "x.unknownext", clip); }, {"x.unknownext", "container"});
  expect_error<UsageError>([&] { write_video_file(dir / "x.mkv", clip, "no_such_codec"); }, {"x.mkv", "no_such_codec"});
  expect_error<UsageError>([&] { write_video_file(dir / "x.mkv", clip, "aac"); }, {"x.mkv", "aac"});
  expect_error<UsageError>([&] { write_video_file(dir / "x.webm", clip, "png"); }, {"x.webm", "cannot hold"});
  VideoClip bad = clip;
  bad.frames = clip.frames.to(at::kFloat);
  expect_error<UsageError>([&] { write_video_file(dir / "x.mkv", bad, "ffv1"); }, {"x.mkv", "uint8"});
  bad.frames = smooth_frames(2, 2, 8, 8);
  expect_error<UsageError>([&] { write_video_file(dir / "x.mkv", bad, "ffv1"); }, {"x.mkv", "channels"});
  bad = clip;
  bad.fps = 0;
  expect_error<UsageError>([&] { write_video_file(dir / "x.mkv", bad, "ffv1"); }, {"x.mkv", "fps"});
  // Nothing was left behind: neither the file nor a temporary.
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(VideoEncoder, WritesAtomicallyAndReplacesAnOldFile) {
  TempDir dir;
  const std::string path = dir / "clip.mkv";
  write_video_file(path, smooth_clip(1, 2, 8, 8, 25.0), "ffv1");
  write_video_file(path, smooth_clip(1, 5, 8, 8, 25.0), "ffv1");
  EXPECT_EQ(decode_video_file(path, 1).frames.size(1), 5);
  if (has_video_encoder("libx264")) {  // 4:2:0 needs even sizes: the encoder refuses, the old file stays
    try {
      write_video_file(dir / "clip.mp4", smooth_clip(3, 2, 21, 33, 25.0), "libx264");
      EXPECT_EQ(decode_video_file(dir / "clip.mp4", 3).frames.size(1), 2);
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("clip.mp4"), std::string::npos) << e.what();
      EXPECT_FALSE(fs::exists(dir / "clip.mp4"));
    }
  }
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) entries += entry.path().filename() != "clip.mp4";
  EXPECT_EQ(entries, 1);  // no temporaries
  EXPECT_FALSE(has_video_encoder("no_such_codec"));
  EXPECT_FALSE(has_video_encoder("aac"));
  EXPECT_TRUE(has_video_encoder("ffv1"));
}

}  // namespace
}  // namespace sparsevit::data
