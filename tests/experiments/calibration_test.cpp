// `calibrate`: mean attention maps of a trained dense checkpoint -> .npy -> pruned patterns.
#include "experiments/calibration.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "config/attention_spec.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/vision_transformer.h"
#include "patterns/pattern_stats.h"
#include "patterns/pruning_mask.h"
#include "pipelines/checkpoint_model.h"
#include "pipelines/finetune.h"
#include "support/synthetic_idx.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

namespace fs = std::filesystem;

class CalibrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("sparsevit_calibration_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "data");
    testing::write_synthetic_idx(root_ / "data", "train", 128, 1);
    testing::write_synthetic_idx(root_ / "data", "t10k", 32, 2);
    // One short epoch of a dense 28x28 / patch-4 model (N = 50): the checkpoint to calibrate.
    pipelines::TrainConfig c;
    c.dataset = "mnist";
    c.data_path = (root_ / "data").string();
    c.model = "vit_nano_patch4_28";
    c.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_dense.yaml";
    c.epochs = 1;
    c.batch_size = 32;
    c.lr = 1e-3;
    c.threads = 2;
    c.output_dir = (root_ / "dense").string();
    pipelines::run_finetune(c);
    std::ofstream(root_ / "pruning.yaml") << "attention:\n  mask: pruning\n  mask_kwargs:\n    pruning_ratio: 0.9\n"
                                          << "    scores_file: " << (root_ / "scores.npy").string() << "\n";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static CalibrateConfig config() {
    CalibrateConfig c;
    c.resume = (root_ / "dense" / "checkpoint.pt").string();
    c.attn_cfg = (root_ / "pruning.yaml").string();
    c.dataset = "mnist";
    c.data_path = (root_ / "data").string();
    c.max_samples = 40;  // not a multiple of the batch: the last batch is partial
    c.batch_size = 16;
    c.threads = 2;
    return c;
  }

  static fs::path root_;
};
fs::path CalibrationTest::root_;

TEST_F(CalibrationTest, WritesTheMeanAttentionMapsAndPrunesToTheTarget) {
  const CalibrateSummary s = run_calibrate(config());
  EXPECT_EQ(s.output, (root_ / "scores.npy").string());
  EXPECT_EQ(s.samples, 40);
  EXPECT_EQ(s.layers, 6);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.tokens, 50);
  EXPECT_NEAR(s.pruning_ratio, 0.9, 0.005);
  EXPECT_LT(s.density, 0.2);

  // The file is what `mask: pruning` reads; every query row of a mean of softmaxes sums to 1.
  patterns::MaskContext ctx;
  ctx.num_tokens = 50;
  ctx.num_heads = 4;
  ctx.num_layers = 6;
  ctx.num_prefix_tokens = 1;
  ctx.layer = 2;
  const patterns::LayerScores scores = patterns::load_layer_scores(s.output, ctx);
  ASSERT_EQ(scores.size(), 4u);
  for (const auto& head : scores)
    for (int j = 0; j < 50; ++j) {
      double row = 0;
      for (int k = 0; k < 50; ++k) row += head[j * 50 + k];
      EXPECT_NEAR(row, 1.0, 1e-4);
    }

  // Layer 2's scores against softmax(q k^T / sqrt(d)) computed here from the checkpoint's
  // qkv weights on the same 40 images, in float64.
  const train::LoadedCheckpoint ckpt(config().resume);
  auto model = pipelines::load_checkpoint_vit(ckpt, "test");
  model->eval();
  torch::NoGradGuard no_grad;
  auto set = data::max_samples(data::make_dataset("mnist", (root_ / "data").string(), true), 40);
  const auto transform = data::build_eval_transform(data::transform_config_for("mnist", 28, 1));
  std::vector<at::Tensor> images;
  data::Rng rng(0);
  for (int64_t i = 0; i < 40; ++i) images.push_back(transform(set->get(i).image, rng));
  const at::Tensor x = model->attention_inputs(at::stack(images))[2].to(at::kDouble);
  const auto params = model->named_parameters();
  const at::Tensor w = params["blocks.2.attn.qkv.weight"].to(at::kDouble);
  const at::Tensor b = params["blocks.2.attn.qkv.bias"].to(at::kDouble);
  const at::Tensor qkv = at::linear(x, w, b).reshape({40, 50, 3, 4, 16}).permute({2, 0, 3, 1, 4});
  const at::Tensor expected = at::softmax(at::matmul(qkv[0], qkv[1].transpose(-2, -1)) / 4.0, -1).mean(0);
  for (int h = 0; h < 4; ++h)
    for (int e = 0; e < 50 * 50; e += 7)
      EXPECT_NEAR(scores[h][e], expected[h].view(-1)[e].item<double>(), 2e-5) << "head " << h << " pair " << e;
}

TEST_F(CalibrationTest, ExplicitOutputAndTheCalibratedConfigTrains) {
  CalibrateConfig c = config();
  c.output = (root_ / "out" / "explicit.npy").string();
  EXPECT_EQ(run_calibrate(c).output, c.output);
  ASSERT_TRUE(fs::exists(c.output));
  EXPECT_FALSE(fs::exists(c.output + ".tmp"));
  // The pruning config with these scores builds a model that trains and reports its ratio.
  pipelines::TrainConfig t;
  t.dataset = "mnist";
  t.data_path = (root_ / "data").string();
  t.model = "vit_nano_patch4_28";
  t.attn_cfg = (root_ / "pruning.yaml").string();
  t.attn_set = {"scores_file=" + c.output};
  t.epochs = 1;
  t.batch_size = 32;
  t.max_train_samples = 64;
  t.threads = 2;
  const pipelines::TrainSummary s = pipelines::run_finetune(t);
  EXPECT_NEAR(s.pruning_ratio, 0.9, 0.005);
}

TEST_F(CalibrationTest, RejectsBadInput) {
  CalibrateConfig c = config();
  c.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_fibottention.yaml";
  EXPECT_THROW(run_calibrate(c), UsageError);  // not a pruning config
  c = config();
  c.resume = (root_ / "missing.pt").string();
  EXPECT_THROW(run_calibrate(c), RuntimeError);
  c = config();
  c.split = "val";
  EXPECT_THROW(run_calibrate(c), UsageError);
  c = config();
  c.resume.clear();
  EXPECT_THROW(run_calibrate(c), UsageError);
}

}  // namespace
}  // namespace sparsevit::experiments
