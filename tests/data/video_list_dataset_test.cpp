// Video datasets (data/video_list_dataset.h, data/video_clip_dataset.h): TimeSformer's annotation
// lists, frame folders and video files under one temp folder written by the test itself (an ffv1
// .mkv, an mjpeg .avi, a folder of PNG frames), the train / multi-view test clips over them, the
// model-input transform, the loader's determinism and the factory.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/data_loader.h"
#include "data/image_codec.h"
#include "data/video_clip_dataset.h"
#include "data/video_encoder.h"
#include "data/video_list_dataset.h"
#include "data_test_util.h"
#include "util/errors.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using testing::smooth_clip;
using testing::write_string;
namespace fs = std::filesystem;

constexpr int64_t kHeight = 24, kWidth = 32;

// Frame k (1-based) of a frame folder: every pixel of channel c is 20 k + c.
Image folder_frame(int64_t k, int64_t height = kHeight, int64_t width = kWidth) {
  Image image;
  image.width = width;
  image.height = height;
  image.channels = 3;
  image.pixels.resize(static_cast<std::size_t>(height * width * 3));
  for (std::size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(20 * k + i % 3);
  return image;
}

// ---------------------------------------------------------------- parse_video_list

TEST(ParseVideoList, SpaceTabAndCommaSeparatorsAndThePathResolvedAgainstTheBaseDir) {
  const auto e = parse_video_list("a.mp4 0\nb/c.avi\t3\nd.mkv,12\n", "list.csv", "/data/ssv2");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].path, "/data/ssv2/a.mp4");
  EXPECT_EQ(e[0].label, 0);
  EXPECT_EQ(e[1].path, "/data/ssv2/b/c.avi");
  EXPECT_EQ(e[1].label, 3);
  EXPECT_EQ(e[2].path, "/data/ssv2/d.mkv");
  EXPECT_EQ(e[2].label, 12);
}

TEST(ParseVideoList, PathsWithSpacesTakeTheLastFieldAsLabel) {
  const auto e = parse_video_list("my clips/riding a bike.mp4 7\nx y,z.mp4,2\nf  1\n", "l.csv", "/b");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].path, "/b/my clips/riding a bike.mp4");
  EXPECT_EQ(e[0].label, 7);
  EXPECT_EQ(e[1].path, "/b/x y,z.mp4");
  EXPECT_EQ(e[1].label, 2);
  EXPECT_EQ(e[2].path, "/b/f");  // runs of separators before the label are trimmed off the path
  EXPECT_EQ(e[2].label, 1);
}

TEST(ParseVideoList, CommentsBlankLinesCrlfAndSurroundingWhitespaceAreSkipped) {
  const auto e = parse_video_list("# path label\n\n   \n  a.mp4 1  \r\n\t# indented comment\r\nb.mp4 007\r\n", "l.csv",
                                  "/b");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].path, "/b/a.mp4");
  EXPECT_EQ(e[0].label, 1);
  EXPECT_EQ(e[1].path, "/b/b.mp4");
  EXPECT_EQ(e[1].label, 7);
  EXPECT_TRUE(parse_video_list("", "l.csv", "/b").empty());
  EXPECT_TRUE(parse_video_list("# only a comment\n\n", "l.csv", "/b").empty());
}

TEST(ParseVideoList, AbsolutePathsAreKeptAndAnEmptyBaseDirKeepsRelativeOnes) {
  const auto e = parse_video_list("/videos/a.mp4 1\nrel/b.mp4 2\n", "l.csv", "/base");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].path, "/videos/a.mp4");
  EXPECT_EQ(e[1].path, "/base/rel/b.mp4");
  const auto kept = parse_video_list("rel/b.mp4 2\n", "l.csv", "");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].path, "rel/b.mp4");
}

TEST(ParseVideoList, BadLinesAreUsageErrorsNamingSourceAndLine) {
  const std::string ok = "# header\n\na.mp4 0\n";  // the bad line is line 4
  auto bad = [&](const std::string& line) { return [line, &ok] { parse_video_list(ok + line + "\n", "DIR/train.csv", "/b"); }; };
  expect_error<UsageError>(bad("b.mp4"), {"DIR/train.csv:4:", "expected 'PATH LABEL'", "b.mp4"});
  expect_error<UsageError>(bad("b.mp4   "), {"DIR/train.csv:4:", "expected 'PATH LABEL'"});
  expect_error<UsageError>(bad("b.mp4 cat"), {"DIR/train.csv:4:", "label 'cat' is not a class index"});
  expect_error<UsageError>(bad("b.mp4 -1"), {"DIR/train.csv:4:", "label '-1' is not a class index"});
  expect_error<UsageError>(bad("b.mp4 +1"), {"DIR/train.csv:4:", "label '+1'"});
  expect_error<UsageError>(bad("b.mp4 1.5"), {"DIR/train.csv:4:", "label '1.5'"});
  expect_error<UsageError>(bad("b.mp4 1e3"), {"DIR/train.csv:4:", "label '1e3'"});
  // Too many digits for a class index: refused, not an overflow in std::stoll.
  expect_error<UsageError>(bad("b.mp4 123456789012345678901234"), {"DIR/train.csv:4:", "is not a class index"});
  // A line with only a label, or an empty path before the separator.
  expect_error<UsageError>(bad("3"), {"DIR/train.csv:4:", "expected 'PATH LABEL', got '3'"});
  expect_error<UsageError>(bad(",3"), {"DIR/train.csv:4:", "expected 'PATH LABEL'"});
  expect_error<UsageError>(bad(" \t 3"), {"DIR/train.csv:4:", "expected 'PATH LABEL'"});
  // The largest accepted label has 9 digits.
  EXPECT_EQ(parse_video_list("a 999999999\n", "l", "/b").at(0).label, 999999999);
}

TEST(ParseVideoList, NulBytesAreUsageErrors) {
  const std::string text = std::string("a.mp4 0\nb") + '\0' + std::string(".mp4 1\n");
  expect_error<UsageError>([&] { parse_video_list(text, "l.csv", "/b"); }, {"l.csv:2:", "NUL byte"});
  const std::string in_label = std::string("a.mp4 1") + '\0' + "\n";
  expect_error<UsageError>([&] { parse_video_list(in_label, "l.csv", "/b"); }, {"l.csv:1:"});
}

// ---------------------------------------------------------------- video_list_path

TEST(VideoListPath, TrainCsvForTrainingTestCsvPreferredOverValCsvForEvaluation) {
  TempDir dir;
  write_string(dir / "train.csv", "a 0\n");
  write_string(dir / "val.csv", "a 0\n");
  EXPECT_EQ(video_list_path(dir.path().string(), true), dir / "train.csv");
  EXPECT_EQ(video_list_path(dir.path().string(), false), dir / "val.csv");
  write_string(dir / "test.csv", "a 0\n");
  EXPECT_EQ(video_list_path(dir.path().string(), false), dir / "test.csv");
}

TEST(VideoListPath, AMissingListIsAUsageErrorNamingTheFolder) {
  TempDir dir;
  expect_error<UsageError>([&] { video_list_path(dir.path().string(), true); },
                           {dir.path().string(), "has no train.csv", "PATH LABEL"});
  expect_error<UsageError>([&] { video_list_path(dir.path().string(), false); },
                           {dir.path().string(), "has no test.csv or val.csv"});
  write_string(dir / "test.csv", "a 0\n");  // evaluation lists do not count for training
  expect_error<UsageError>([&] { video_list_path(dir.path().string(), true); }, {"has no train.csv"});
  fs::create_directories(dir / "train.csv");  // a folder of that name is not a list
  expect_error<UsageError>([&] { video_list_path(dir.path().string(), true); }, {"has no train.csv"});
}

// ---------------------------------------------------------------- datasets over a temp folder

// One folder for the suite (writing it takes ~50 ms):
//   videos/a.mkv        ffv1, RGB, 20 frames (lossless)         train label 0
//   videos/b.avi        mjpeg, RGB, 6 frames (shorter than the window)  train 2, test 3
//   frames/clip one/    frame_1.png ... frame_12.png + notes.txt  train 1, test 4
class VideoListFolder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    if (!has_video_encoder("ffv1") || !has_video_encoder("mjpeg")) return;
    a_ = new VideoClip(smooth_clip(3, 20, kHeight, kWidth, 30.0));
    b_ = new VideoClip(smooth_clip(3, 6, kHeight, kWidth, 30.0));
    fs::create_directories(*dir_ / "videos");
    fs::create_directories(*dir_ / "frames/clip one");
    write_video_file(*dir_ / "videos/a.mkv", *a_, "ffv1");
    write_video_file(*dir_ / "videos/b.avi", *b_, "mjpeg");
    // Written out of order; lexicographic order would put frame_10 before frame_2.
    for (int64_t k : {10, 2, 12, 1, 7, 3, 11, 4, 9, 5, 8, 6})
      write_png(*dir_ / ("frames/clip one/frame_" + std::to_string(k) + ".png"), folder_frame(k));
    write_string(*dir_ / "frames/clip one/notes.txt", "not a frame\n");
    write_string(*dir_ / "train.csv", "videos/a.mkv 0\nvideos/b.avi,2\nframes/clip one\t1\n");
    write_string(*dir_ / "test.csv", "# path label\n\nvideos/b.avi 3\nframes/clip one 4\n");
    ready_ = true;
  }
  static void TearDownTestSuite() {
    delete a_;
    delete b_;
    delete dir_;
    a_ = b_ = nullptr;
    dir_ = nullptr;
    ready_ = false;
  }
  void SetUp() override {
    if (!has_video_encoder("ffv1") || !has_video_encoder("mjpeg"))
      GTEST_SKIP() << "this FFmpeg build lacks the ffv1 or mjpeg encoder";
    ASSERT_TRUE(ready_) << "writing the fixture folder failed (see SetUpTestSuite)";
  }
  static std::string root() { return dir_->path().string(); }

  // num_frames 4 every 2 frames at 30 fps: an 8-frame window (b.avi's 6 frames are padded).
  static ClipSampling sampling(int64_t clips = 1, int64_t crops = 1) {
    ClipSampling s;
    s.num_frames = 4;
    s.sampling_rate = 2;
    s.jitter_min = 24;
    s.jitter_max = 32;
    s.crop_size = 16;
    s.test_num_clips = clips;
    s.test_num_crops = crops;
    return s;
  }

  static TempDir* dir_;
  static VideoClip* a_;
  static VideoClip* b_;
  static bool ready_;
};
bool VideoListFolder::ready_ = false;
TempDir* VideoListFolder::dir_ = nullptr;
VideoClip* VideoListFolder::a_ = nullptr;
VideoClip* VideoListFolder::b_ = nullptr;

TEST_F(VideoListFolder, LabelsClassCountAndDescribe) {
  const VideoListDataset train(root(), true);
  ASSERT_EQ(train.size(), 3);
  EXPECT_EQ(train.label(0), 0);
  EXPECT_EQ(train.label(1), 2);
  EXPECT_EQ(train.label(2), 1);
  EXPECT_EQ(train.entries()[2].path, (dir_->path() / "frames/clip one").string());
  EXPECT_EQ(train.num_classes(), 5);  // test.csv's label 4 counts too
  EXPECT_EQ(train.channels(), 3);
  EXPECT_EQ(train.describe(), (dir_->path() / "train.csv").string() + ": 3 clips, 5 classes");

  const VideoListDataset test(root(), false, 1);
  ASSERT_EQ(test.size(), 2);
  EXPECT_EQ(test.label(0), 3);
  EXPECT_EQ(test.label(1), 4);
  EXPECT_EQ(test.num_classes(), 5);
  EXPECT_EQ(test.channels(), 1);
  EXPECT_EQ(test.describe(), (dir_->path() / "test.csv").string() + ": 2 clips, 5 classes");

  expect_error<RuntimeError>([&] { train.label(3); }, {"out of range"});
  expect_error<RuntimeError>([&] { train.clip(-1); }, {"out of range"});
  expect_error<UsageError>([&] { VideoListDataset(root(), true, 2); }, {"channels must be 1 or 3"});
}

TEST_F(VideoListFolder, VideoFilesDecode) {
  const VideoListDataset train(root(), true);
  const VideoClip a = train.clip(0);
  ASSERT_EQ(a.frames.sizes(), a_->frames.sizes());
  EXPECT_TRUE(at::equal(a.frames, a_->frames));  // ffv1 is lossless
  EXPECT_NEAR(a.fps, 30.0, 1e-3);
  const VideoClip b = train.clip(1);
  ASSERT_EQ(b.frames.sizes(), b_->frames.sizes());
  EXPECT_LT((b.frames.to(at::kFloat) - b_->frames.to(at::kFloat)).abs().mean().item<double>(), 3.0);

  const VideoListDataset gray(root(), false, 1);
  EXPECT_EQ(gray.clip(0).frames.sizes(), (std::vector<int64_t>{1, 6, kHeight, kWidth}));
}

TEST_F(VideoListFolder, FrameFoldersAreReadInNaturalOrderAtThirtyFps) {
  const VideoListDataset train(root(), true);
  const VideoClip clip = train.clip(2);
  ASSERT_EQ(clip.frames.sizes(), (std::vector<int64_t>{3, 12, kHeight, kWidth}));
  EXPECT_EQ(clip.frames.scalar_type(), at::kByte);
  EXPECT_EQ(clip.fps, 30.0);
  for (int64_t t = 0; t < 12; ++t)
    for (int64_t c = 0; c < 3; ++c) {
      SCOPED_TRACE("frame " + std::to_string(t) + " channel " + std::to_string(c));
      EXPECT_TRUE((clip.frames[c][t] == 20 * (t + 1) + c).all().item<bool>());  // frame_{t+1}.png
    }
  // The same through read_frame_folder, gray and at another rate.
  const VideoClip gray = read_frame_folder(root() + "/frames/clip one", 1, 25.0);
  ASSERT_EQ(gray.frames.sizes(), (std::vector<int64_t>{1, 12, kHeight, kWidth}));
  EXPECT_EQ(gray.fps, 25.0);
  // libpng converts to gray in linear light, so (40, 41, 42) can come out as 43: still in order.
  for (int64_t t = 0; t < 12; ++t) EXPECT_NEAR(gray.frames[0][t][0][0].item<int64_t>(), 20 * (t + 1) + 1, 3);
}

TEST_F(VideoListFolder, AListedPathThatDoesNotExistIsAUsageErrorNamingIt) {
  TempDir dir;
  write_string(dir / "train.csv", root() + "/videos/a.mkv 0\nvideos/missing.mp4 1\nalso_missing 1\n");
  expect_error<UsageError>([&] { VideoListDataset(dir.path().string(), true); },
                           {dir / "train.csv", "2 listed clip(s) do not exist", dir / "videos/missing.mp4"});
  write_string(dir / "train.csv", "# nothing\n");
  expect_error<UsageError>([&] { VideoListDataset(dir.path().string(), true); }, {dir / "train.csv", "lists no clip"});
  write_string(dir / "train.csv", "x 1 2 three\n");
  expect_error<UsageError>([&] { VideoListDataset(dir.path().string(), true); }, {dir / "train.csv" + ":1:", "'three'"});
  expect_error<UsageError>([&] { VideoListDataset(dir.path().string(), false); }, {"has no test.csv or val.csv"});
}

TEST_F(VideoListFolder, BadFrameFoldersAndUnreadableVideosAreRuntimeErrorsNamingTheFile) {
  TempDir dir;
  fs::create_directories(dir / "sizes");
  write_png(dir / "sizes/frame_1.png", folder_frame(1));
  write_png(dir / "sizes/frame_2.png", folder_frame(2, 16, 16));
  fs::create_directories(dir / "empty");
  write_string(dir / "empty/readme.txt", "no frames here\n");
  write_string(dir / "bad.mp4", "this is not a video file at all, just some text bytes\n");
  write_string(dir / "train.csv", "sizes 0\nempty 1\nbad.mp4 2\n");
  const VideoListDataset train(dir.path().string(), true);
  expect_error<RuntimeError>([&] { train.clip(0); }, {dir / "sizes/frame_2.png", "16x16", "32x24"});
  expect_error<RuntimeError>([&] { train.clip(1); }, {dir / "empty", "has no .jpg/.jpeg/.png frame"});
  expect_error<RuntimeError>([&] { train.clip(2); }, {dir / "bad.mp4"});
  // The same through the clip dataset (what the loader's workers call).
  const VideoClipDataset clips(std::make_shared<VideoListDataset>(dir.path().string(), true), sampling(), true);
  expect_error<RuntimeError>([&] { clips.get(2); }, {dir / "bad.mp4"});
}

TEST_F(VideoListFolder, ClipDatasetSizesLabelsAndShapes) {
  const auto train_videos = std::make_shared<VideoListDataset>(root(), true);
  const VideoClipDataset train(train_videos, sampling(2, 3), true);
  EXPECT_EQ(train.views(), 1);  // test views only apply to evaluation
  EXPECT_EQ(train.size(), 3);
  EXPECT_EQ(train.num_classes(), 5);
  EXPECT_EQ(train.channels(), 3);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(train.label(i), train_videos->label(i));

  const VideoClipDataset test(std::make_shared<VideoListDataset>(root(), false), sampling(2, 3), false);
  EXPECT_EQ(test.views(), 6);
  EXPECT_EQ(test.size(), 12);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(test.label(i), i / 6 == 0 ? 3 : 4) << i;
  EXPECT_NE(test.describe().find("2 clips, 5 classes, clips of 4 frames every 2, 2 x 3 views"), std::string::npos)
      << test.describe();
  expect_error<RuntimeError>([&] { test.label(12); }, {});
  expect_error<RuntimeError>([&] { test.get(-1); }, {});

  for (const VideoClipDataset* ds : {&train, &test})
    for (int64_t i : {int64_t{0}, ds->size() - 1}) {
      const Sample s = ds->get(i);
      EXPECT_EQ(s.image.sizes(), (std::vector<int64_t>{3, 4, 16, 16}));
      EXPECT_EQ(s.image.scalar_type(), at::kFloat);
      EXPECT_GE(s.image.min().item<float>(), 0.0f);
      EXPECT_LE(s.image.max().item<float>(), 1.0f);
      EXPECT_EQ(s.label, ds->label(i));
    }
}

TEST_F(VideoListFolder, TrainSamplesFollowTheRngAndTestViewsAreDeterministic) {
  const VideoClipDataset train(std::make_shared<VideoListDataset>(root(), true), sampling(), true);
  // a.mkv: 20 frames, an 8-frame window, random scale, crop and flip.
  auto sample = [&](uint64_t seed) {
    Rng rng = make_rng(seed, RngStream::kSample, 0, 0);
    return train.get(0, rng).image;
  };
  EXPECT_TRUE(at::equal(sample(1), sample(1)));
  int differing = 0;
  for (uint64_t seed = 2; seed < 6; ++seed) differing += at::equal(sample(1), sample(seed)) ? 0 : 1;
  EXPECT_GE(differing, 3);
  // get(i) without a generator is get(i, make_rng(0, kSample, 0, i)).
  EXPECT_TRUE(at::equal(train.get(0).image, sample(0)));

  const VideoClipDataset test(std::make_shared<VideoListDataset>(root(), false), sampling(2, 3), false);
  for (int64_t i = 0; i < test.size(); ++i) {
    Rng r1(1), r2(99);
    EXPECT_TRUE(at::equal(test.get(i, r1).image, test.get(i, r2).image)) << i;
  }
  // Views differ (the frame folder's frames are uniform, so a.mkv through a list of its own).
  TempDir dir;
  write_string(dir / "test.csv", root() + "/videos/a.mkv 0\n");
  const VideoClipDataset a_views(std::make_shared<VideoListDataset>(dir.path().string(), false), sampling(2, 3), false);
  ASSERT_EQ(a_views.size(), 6);
  EXPECT_FALSE(at::equal(a_views.get(0).image, a_views.get(2).image));  // left vs right crop
  EXPECT_FALSE(at::equal(a_views.get(0).image, a_views.get(3).image));  // first vs second window
}

TEST_F(VideoListFolder, PaddedClipsCountWindowsLongerThanTheVideo) {
  const VideoClipDataset test(std::make_shared<VideoListDataset>(root(), false), sampling(2, 3), false);
  EXPECT_EQ(test.padded_clips(), 0);
  for (int64_t i = 0; i < test.size(); ++i) test.get(i);
  EXPECT_EQ(test.padded_clips(), 6);  // b.avi's 6 views (6 frames < 8); the 12 frames are not padded
  const VideoClipDataset train(std::make_shared<VideoListDataset>(root(), true), sampling(), true);
  train.get(0);
  train.get(2);
  EXPECT_EQ(train.padded_clips(), 0);
  train.get(1);
  train.get(1);
  EXPECT_EQ(train.padded_clips(), 2);
  // A short window fits every video.
  ClipSampling one = sampling();
  one.sampling_rate = 1;
  one.num_frames = 6;
  const VideoClipDataset fits(std::make_shared<VideoListDataset>(root(), true), one, true);
  for (int64_t i = 0; i < fits.size(); ++i) fits.get(i);
  EXPECT_EQ(fits.padded_clips(), 0);
}

TEST_F(VideoListFolder, LoaderBatchesAreFiveDimensionalAndIndependentOfWorkers) {
  const auto train = std::make_shared<VideoClipDataset>(std::make_shared<VideoListDataset>(root(), true), sampling(), true);
  const Transform transform = build_video_transform(3, video_mean_std(3));
  auto run = [&](int64_t workers, uint64_t seed) {
    LoaderOptions o;
    o.batch_size = 2;
    o.shuffle = true;
    o.num_workers = workers;
    o.seed = seed;
    DataLoader loader(train, transform, o);
    loader.set_epoch(1);
    std::vector<Batch> batches;
    Batch b;
    while (loader.next(b)) batches.push_back(b);
    return batches;
  };
  const auto w2 = run(2, 7), w2_again = run(2, 7), w0 = run(0, 7), other = run(2, 8);
  ASSERT_EQ(w2.size(), 2u);
  EXPECT_EQ(w2[0].images.sizes(), (std::vector<int64_t>{2, 3, 4, 16, 16}));
  EXPECT_EQ(w2[1].images.sizes(), (std::vector<int64_t>{1, 3, 4, 16, 16}));
  EXPECT_EQ(w2[0].images.scalar_type(), at::kFloat);
  for (const auto* run_batches : {&w2_again, &w0}) {
    ASSERT_EQ(run_batches->size(), w2.size());
    for (std::size_t k = 0; k < w2.size(); ++k) {
      EXPECT_EQ((*run_batches)[k].indices, w2[k].indices);
      EXPECT_TRUE(at::equal((*run_batches)[k].labels, w2[k].labels));
      EXPECT_TRUE(at::equal((*run_batches)[k].images, w2[k].images));
    }
  }
  bool differs = other.size() != w2.size();
  for (std::size_t k = 0; !differs && k < w2.size(); ++k)
    differs = other[k].indices != w2[k].indices || !at::equal(other[k].images, w2[k].images);
  EXPECT_TRUE(differs);
}

TEST_F(VideoListFolder, MakeVideoDatasetReadsTheSplitsList) {
  const auto train = make_video_dataset("video_list", root(), true, 3);
  EXPECT_EQ(train->size(), 3);
  EXPECT_EQ(train->channels(), 3);
  const auto test = make_video_dataset("video_list", root(), false, 1);
  EXPECT_EQ(test->size(), 2);
  EXPECT_EQ(test->channels(), 1);
  EXPECT_EQ(test->num_classes(), 5);
}

// ---------------------------------------------------------------- transform and factory

TEST(VideoTransform, GrayIsRepeatedAndEveryFrameNormalised) {
  EXPECT_EQ(video_mean_std(3).mean, std::vector<double>(3, 0.45));
  EXPECT_EQ(video_mean_std(3).std, std::vector<double>(3, 0.225));
  EXPECT_EQ(video_mean_std(1).mean, std::vector<double>(1, 0.45));
  // Frame t holds (t + 1) / 10 everywhere, plus x / 100 along the width.
  at::Tensor clip = at::empty({1, 4, 3, 5}, at::kFloat);
  auto a = clip.accessor<float, 4>();
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 5; ++x) a[0][t][y][x] = static_cast<float>((t + 1) / 10.0 + x / 100.0);
  Rng rng(0);
  const at::Tensor out = build_video_transform(3, video_mean_std(3))(clip, rng);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{3, 4, 3, 5}));
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  auto o = out.accessor<float, 4>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t y = 0; y < 3; ++y)
        for (int64_t x = 0; x < 5; ++x)
          EXPECT_NEAR(o[c][t][y][x], ((t + 1) / 10.0 + x / 100.0 - 0.45) / 0.225, 1e-5) << c << t << y << x;
  EXPECT_NEAR(build_video_transform(1, video_mean_std(1))(at::full({1, 2, 2, 2}, 0.9f), rng).max().item<float>(), 2.0,
              1e-5);
}

TEST(VideoTransform, RgbToOneChannelUint8InputsAndBadShapes) {
  Rng rng(0);
  // Equal channels: the luminance is the value itself.
  const at::Tensor rgb = at::full({3, 2, 4, 4}, 0.675f);
  const at::Tensor gray = build_video_transform(1, video_mean_std(1))(rgb, rng);
  ASSERT_EQ(gray.sizes(), (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_NEAR(gray.min().item<float>(), 1.0, 1e-4);
  EXPECT_NEAR(gray.max().item<float>(), 1.0, 1e-4);
  // uint8 clips are divided by 255 first.
  const at::Tensor bytes = at::full({3, 2, 4, 4}, 255, at::kByte);
  EXPECT_NEAR(build_video_transform(3, video_mean_std(3))(bytes, rng).mean().item<float>(), 0.55 / 0.225, 1e-5);
  const Transform t = build_video_transform(3, video_mean_std(3));
  expect_error<RuntimeError>([&] { t(at::zeros({3, 4, 4}), rng); }, {"expected a clip [C, T, H, W]"});
  expect_error<RuntimeError>([&] { t(at::zeros({1, 3, 2, 4, 4}), rng); }, {"expected a clip"});
}

TEST(VideoDatasetFactory, NamesAndErrors) {
  EXPECT_EQ(video_dataset_names(),
            (std::vector<std::string>{"moving_fashion_mnist", "moving_fashion_mnist_order", "video_list"}));
  EXPECT_EQ(resolve_video_dataset_name("auto", ""), "moving_fashion_mnist");
  EXPECT_EQ(resolve_video_dataset_name("auto", "/data/ssv2"), "video_list");
  EXPECT_EQ(resolve_video_dataset_name("video_list", ""), "video_list");
  EXPECT_EQ(resolve_video_dataset_name("moving_fashion_mnist", "/x"), "moving_fashion_mnist");
  expect_error<UsageError>([] { make_video_dataset("video_lst", "/x", true, 3); },
                           {"video_lst", "did you mean 'video_list'"});
  expect_error<UsageError>([] { make_video_dataset("moving_fashion_mnst", "", true, 1); },
                           {"did you mean 'moving_fashion_mnist'"});
  expect_error<UsageError>([] { make_video_dataset("video_list", "", true, 3); }, {"--data_path is required", "video_list"});
  TempDir dir;
  expect_error<UsageError>([&] { make_video_dataset("video_list", dir.path().string(), true, 3); }, {"has no train.csv"});
  expect_error<UsageError>([] { VideoClipDataset(nullptr, ClipSampling{}, true); }, {"null video dataset"});
}

}  // namespace
}  // namespace sparsevit::data
