// Video models end to end: `predict` of a TimeSformer against the independent float64 reference
// (tests/golden/timesformer_reference.py, weights saved by PyTorch with TimeSformer's `model.`
// keys), the same model on a video file and on a folder of its frames, and the CLI round trip
// finetune -> eval -> predict -> flops on moving_fashion_mnist.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/image_codec.h"
#include "data/video_encoder.h"
#include "inference/predict.h"
#include "support/cli_runner.h"
#include "util/errors.h"
#include "util/npy_file.h"

namespace sparsevit {
namespace {

using namespace sparsevit::testing;
const std::string kDir = std::string(SPARSEVIT_SOURCE_DIR) + "/tests/golden/predict/";

// The golden TimeSformer's frame shape (8x8x3, patch 4, width 16, depth 2, 5 classes, 4 frames)
// is read off its weights; only the heads are given.
inference::PredictOptions golden_options() {
  inference::PredictOptions p;
  p.weights = kDir + "timesformer.pth";
  p.input = kDir + "clips.npy";
  p.model.model = "timesformer_tiny_patch16_224";
  p.model.num_heads = 2;
  p.model.threads = 1;
  return p;
}

TEST(VideoPredict, TimeSformerLogitsMatchTheIndependentReference) {
  const inference::Predictions out = inference::run_predict(golden_options());
  const NpyFloat32 e = read_npy_float32(kDir + "logits_timesformer.npy", "test");
  const at::Tensor expected = at::from_blob(const_cast<float*>(e.values.data()), e.shape, at::kFloat);
  ASSERT_EQ(out.logits.sizes(), expected.sizes());
  EXPECT_LT((out.logits - expected).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(out.names.front(), "clips.npy[0]");
}

TEST(VideoPredict, ImageShapedNpyIsAUsageErrorNamingTheShape) {
  inference::PredictOptions p = golden_options();
  p.input = kDir + "input.npy";  // [B, C, H, W] images
  try {
    inference::run_predict(p);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("[B, 3, 4, 8, 8]"), std::string::npos) << e.what();
  }
}

// A 6-frame 10x12 RGB clip with content that changes per frame.
data::VideoClip test_clip() {
  data::VideoClip clip;
  clip.frames = (at::arange(3 * 6 * 10 * 12, at::kLong).reshape({3, 6, 10, 12}) * 37 % 251).to(at::kByte);
  clip.fps = 30;
  return clip;
}

TEST(VideoPredict, VideoFileAndFrameFolderGiveTheSameViewsAveragedLogits) {
  TempDir dir;
  const data::VideoClip clip = test_clip();
  const std::string video = (dir.path() / "clip.mkv").string();
  data::write_video_file(video, clip, "ffv1");  // lossless
  const fs::path frames = dir.path() / "frames";
  fs::create_directories(frames);
  for (int64_t t = 0; t < 6; ++t) {
    const at::Tensor hwc = clip.frames.select(1, t).permute({1, 2, 0}).contiguous();
    data::Image image{12, 10, 3, std::vector<uint8_t>(hwc.data_ptr<uint8_t>(), hwc.data_ptr<uint8_t>() + hwc.numel())};
    data::write_png((frames / ("img_" + std::to_string(t + 1) + ".png")).string(), image);
  }
  inference::PredictOptions p = golden_options();
  p.model.test_num_clips = 2;
  p.model.test_num_crops = 3;
  p.input = video;
  const inference::Predictions from_video = inference::run_predict(p);
  p.input = frames.string();
  const inference::Predictions from_frames = inference::run_predict(p);
  ASSERT_EQ(from_video.logits.sizes(), (at::IntArrayRef{1, 5}));
  EXPECT_EQ(from_video.names.front(), "clip.mkv");
  EXPECT_LT((from_video.logits - from_frames.logits).abs().max().item<double>(), 1e-5);
  // One view differs from the mean of six.
  p.model.test_num_clips = 1;
  p.model.test_num_crops = 1;
  EXPECT_GT((inference::run_predict(p).logits - from_frames.logits).abs().max().item<double>(), 1e-4);
}

TEST(VideoPredict, CorruptVideoIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::string bad = (dir.path() / "bad.mp4").string();
  { std::ofstream(bad) << "not a video"; }
  inference::PredictOptions p = golden_options();
  p.input = bad;
  try {
    inference::run_predict(p);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bad.mp4"), std::string::npos) << e.what();
  }
}

TEST(VideoCli, FinetuneEvalPredictAndFlopsOnMovingFashionMnist) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist")) GTEST_SKIP() << "needs Debian's dataset-fashion-mnist";
  TempDir dir;
  const std::string run_dir = (dir.path() / "run").string();
  const Result train = run("finetune --model timesformer_nano_patch4_28 --depth 1 --num_frames 4 --epochs 1"
                           " --max_train_samples 40 --max_eval_samples 20 --batch_size 8 --threads 1 --num_workers 1"
                           " --attn-cfg configs/attention/vit_bigbird.yaml --output_dir " + quote(run_dir));
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  const nlohmann::json summary = nlohmann::json::parse(train.out.substr(train.out.rfind('{')));
  EXPECT_GT(summary.at("spatial_gflops").get<double>(), 0);
  EXPECT_GT(summary.at("temporal_gflops").get<double>(), 0);
  EXPECT_NEAR(summary.at("attention_gflops").get<double>(),
              summary.at("spatial_gflops").get<double>() + summary.at("temporal_gflops").get<double>(), 1e-12);

  // eval rebuilds the video model from the checkpoint; 2 x 3 views per clip.
  const Result eval = run("finetune --eval --resume " + quote(run_dir + "/checkpoint.pt") +
                          " --max_eval_samples 20 --test_num_clips 2 --test_num_crops 3 --threads 1");
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_NE(eval.out.find("\"test_acc1\""), std::string::npos) << eval.describe();

  const std::string npy = (dir.path() / "x.npy").string();
  const at::Tensor x = torch::randn({2, 1, 4, 28, 28});
  write_npy_float32(npy, {2, 1, 4, 28, 28}, std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + x.numel()));
  const Result predict = run("predict --resume " + quote(run_dir + "/checkpoint.pt") + " --input " + quote(npy) +
                             " --threads 1 --topk 1");
  ASSERT_EQ(predict.exit_code, 0) << predict.describe();
  EXPECT_NE(predict.out.find("x.npy[1]:"), std::string::npos) << predict.describe();

  // The spatial attention of frame 1 of a test clip; the masks of the spatial attention.
  const std::string maps = (dir.path() / "maps").string();
  const Result map = run("attention-map --resume " + quote(run_dir + "/checkpoint.pt") +
                         " --dataset moving_fashion_mnist --index 3 --frame 1 --threads 1 --output_dir " + quote(maps));
  ASSERT_EQ(map.exit_code, 0) << map.describe();
  EXPECT_NE(map.out.find("\"frame\":1"), std::string::npos) << map.describe();
  EXPECT_TRUE(fs::exists(fs::path(maps) / "input.png"));
  EXPECT_TRUE(fs::exists(fs::path(maps) / "layer0_head3_full.png"));
  expect_usage_error(run("attention-map --resume " + quote(run_dir + "/checkpoint.pt") +
                         " --dataset moving_fashion_mnist --index 3 --frame 4 --output_dir " + quote(maps)),
                     "--frame 4");
  const Result masks = run("masks --model timesformer_nano_patch4_28 --attn-cfg configs/attention/vit_bigbird.yaml --json");
  ASSERT_EQ(masks.exit_code, 0) << masks.describe();
  EXPECT_EQ(nlohmann::json::parse(masks.out).at("tokens").get<int64_t>(), 50) << masks.out;

  const Result flops = run("flops --model timesformer_base_patch16_224 --attn-cfg configs/attention/vit_dense.yaml --json");
  ASSERT_EQ(flops.exit_code, 0) << flops.describe();
  const nlohmann::json f = nlohmann::json::parse(flops.out);
  // Dense divided space-time attention of TimeSformer-B, 8 frames: per layer and head 2 * 64 FLOPs
  // per pair (docs/conventions.md), 8 frames x 197^2 spatial pairs + 196 patches x 8^2 temporal pairs.
  EXPECT_NEAR(f.at("spatial_gflops").get<double>(), 12 * 12 * 128.0 * 8 * 197 * 197 / 1e9, 1e-9);
  EXPECT_NEAR(f.at("temporal_gflops").get<double>(), 12 * 12 * 128.0 * 196 * 8 * 8 / 1e9, 1e-9);
}

TEST(VideoCli, UnknownAttentionTypeAndImageCommandsAreUsageErrors) {
  expect_usage_error(run("finetune --model timesformer_nano_patch4_28 --attention_type spatial_only --epochs 0"),
                     "spatial_only");
  expect_usage_error(run("pretrain --model mae_timesformer_nano_patch4_28 --epochs 0"), "timesformer_nano_patch4_28");
}

}  // namespace
}  // namespace sparsevit
