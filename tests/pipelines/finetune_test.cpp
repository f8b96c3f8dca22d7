// End-to-end tests of the finetune loop on a tiny synthetic IDX dataset written here.
#include "pipelines/finetune.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/synthetic_training.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::pipelines {
namespace {

namespace fs = std::filesystem;

class TrainerTest : public testing::SyntheticTrainingTest {
 protected:
  TrainerTest() : SyntheticTrainingTest("vit_nano_patch2_28", 512, 2) {}
};

TEST_F(TrainerTest, LearnsAnEasyTaskWithFibottention) {
  TrainConfig c = config("run");
  c.epochs = 5;  // a ViT needs a few hundred images to find the positional signal
  const TrainSummary s = run_finetune(c);
  EXPECT_GE(s.test_acc1, 90.0);
  EXPECT_EQ(s.epochs_run, 5);
  EXPECT_NEAR(s.pruning_ratio, 0.958, 0.01);  // 4 heads of Fibottention at N = 197
  EXPECT_GT(s.attention_gflops, 0.0);
  // metrics.jsonl: one line per epoch with the documented keys.
  std::ifstream metrics(root_ / "run" / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key : {"epoch", "train_loss", "test_loss", "test_acc1", "test_acc5", "lr", "epoch_seconds"})
      EXPECT_TRUE(j.contains(key)) << key;
    ++lines;
  }
  EXPECT_EQ(lines, 5);
  EXPECT_TRUE(fs::exists(root_ / "run" / "config.json"));
  EXPECT_TRUE(fs::exists(root_ / "run" / "attention.yaml"));
}

TEST_F(TrainerTest, Bfloat16AutocastTrainsCloseToFloat32) {
  // --amp bf16: the forward's GEMMs in bfloat16, float32 weights and float32 evaluation. An epoch
  // of it ends at weights that differ from float32's (so autocast is on in the engine) by little
  // (bfloat16 rounding, not a broken model).
  TrainConfig bf16 = config("bf16"), fp32 = config("fp32");
  bf16.epochs = fp32.epochs = 1;
  bf16.amp = "bf16";
  const TrainSummary a = run_finetune(bf16), b = run_finetune(fp32);
  EXPECT_NE(a.test_loss, b.test_loss);
  EXPECT_NEAR(a.test_loss, b.test_loss, 0.05 * b.test_loss);
  bf16.amp = "fp16";
  EXPECT_THROW(run_finetune(bf16), UsageError);
}

TEST_F(TrainerTest, ResumeContinuesExactly) {
  // Interrupt after epoch 0 of a 2-epoch run (its kept checkpoint-0.pt), resume, compare with
  // the uninterrupted run: every parameter bit-identical, same metrics.
  TrainConfig straight = config("straight");
  straight.model_ema = true;
  straight.model_ema_decay = 0.9;
  straight.mixup = 0.8;
  straight.save_ckpt_freq = 1;
  const TrainSummary full = run_finetune(straight);

  TrainConfig resumed = straight;
  resumed.output_dir = (root_ / "resumed").string();
  resumed.save_ckpt_freq = 0;
  resumed.resume = (root_ / "straight" / "checkpoint-0.pt").string();
  const TrainSummary second = run_finetune(resumed);
  EXPECT_EQ(second.epochs_run, 1);
  EXPECT_EQ(second.test_acc1, full.test_acc1);
  EXPECT_EQ(second.test_loss, full.test_loss);
  EXPECT_EQ(second.ema_acc1, full.ema_acc1);
  const train::LoadedCheckpoint a((root_ / "straight" / "checkpoint.pt").string());
  const train::LoadedCheckpoint b((root_ / "resumed" / "checkpoint.pt").string());
  ASSERT_EQ(a.model_tensors().size(), b.model_tensors().size());
  for (size_t i = 0; i < a.model_tensors().size(); ++i)
    EXPECT_TRUE(torch::equal(a.model_tensors()[i].second, b.model_tensors()[i].second)) << a.model_tensors()[i].first;
}

TEST_F(TrainerTest, EvalRebuildsTheModelFromTheCheckpoint) {
  TrainConfig c = config("run");
  c.epochs = 1;
  c.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_structured_local.yaml";
  const TrainSummary trained = run_finetune(c);
  TrainConfig e;  // default model and attention: the checkpoint's must win
  e.dataset = "mnist";
  e.data_path = c.data_path;
  e.eval = true;
  e.threads = 2;
  e.resume = (root_ / "run" / "checkpoint.pt").string();
  const TrainSummary evaluated = run_finetune(e);
  EXPECT_EQ(evaluated.test_acc1, trained.test_acc1);
  EXPECT_NEAR(evaluated.pruning_ratio, 0.9797, 1e-4);
}

TEST_F(TrainerTest, BadSettingsAreUsageErrors) {
  TrainConfig c = config("");
  c.eval = true;  // without --resume
  EXPECT_THROW(run_finetune(c), UsageError);
  c = config("");
  c.batch_size = 0;
  EXPECT_THROW(run_finetune(c), UsageError);
  c = config("");
  c.model = "vit_nano_patch16_28";
  EXPECT_THROW(run_finetune(c), UsageError);
  c = config("");
  c.data_path = (root_ / "missing").string();
  EXPECT_ANY_THROW(run_finetune(c));
}

}  // namespace
}  // namespace sparsevit::pipelines
