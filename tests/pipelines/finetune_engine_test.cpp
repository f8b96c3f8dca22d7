// The engine's contracts as the finetune pipeline relies on them: scheduled budgets advance every
// iteration and the cost a run paid is reported, gradient accumulation equals one large batch,
// the attention YAML is read once and travels verbatim in the checkpoint's model description.
#include "pipelines/finetune.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/attention_spec.h"
#include "models/model_registry.h"
#include "models/vision_transformer.h"
#include "pipelines/checkpoint_model.h"
#include "support/synthetic_training.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::pipelines {
namespace {



namespace fs = std::filesystem;

class FinetuneEngineTest : public testing::SyntheticTrainingTest {
 protected:
  FinetuneEngineTest() : SyntheticTrainingTest("vit_nano_patch4_28", 256, 1) {}

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = root_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::vector<nlohmann::json> metrics(const std::string& run) const {
    std::vector<nlohmann::json> records;
    std::ifstream in(root_ / run / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
    return records;
  }
};

TEST_F(FinetuneEngineTest, ScheduledTopkTrainsAtTheScheduledK) {
  // k goes 50 -> 2 over the run (N = 50): the trainer must advance it every iteration, so the
  // cost paid on average lies strictly between the costs at k_start and k_end, and the second
  // epoch pays less than the first. A k stuck at k_start pays the k_start cost throughout.
  TrainConfig c = config("topk");
  c.attn_cfg = write("topk.yaml", "attention:\n  backend: vit\n  mask: topk\n  mask_kwargs: {k_start: 50, k_end: 2}\n");
  const TrainSummary s = run_finetune(c);
  const double n = 50, d = 16, heads = 4, layers = 6;  // vit_nano_patch4_28
  auto cost = [&](double k) { return layers * heads * (d * n * n + d * n * k) / 1e9; };
  EXPECT_NEAR(s.attention_gflops, cost(2), 1e-12);  // the final budget
  EXPECT_LT(s.attention_gflops_paid, cost(50) - 1e-9);
  EXPECT_GT(s.attention_gflops_paid, cost(2) + 1e-9);
  // Linear schedule over 16 iterations: the mean k is about (50 + 2) / 2.
  EXPECT_NEAR(s.attention_gflops_paid, cost(26), cost(50) - cost(46));
  const auto epochs = metrics("topk");
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_GT(epochs[0]["attention_gflops"].get<double>(), epochs[1]["attention_gflops"].get<double>());
  EXPECT_EQ(s.to_json()["attention_gflops_paid"].get<double>(), s.attention_gflops_paid);
  EXPECT_NE(s.to_text().find("paid on average during training"), std::string::npos) << s.to_text();
}

TEST_F(FinetuneEngineTest, AccumulationMatchesOneLargeBatch) {
  // 2 x 32 with --accum_iter 2 takes the same optimizer steps as 64 at once (same samples per
  // step, same lr and schedule): the weights agree to float rounding.
  TrainConfig big = config("big");
  big.batch_size = 64;
  big.train_crop = "none";
  TrainConfig accumulated = big;
  accumulated.output_dir = (root_ / "accumulated").string();
  accumulated.batch_size = 32;
  accumulated.accum_iter = 2;
  const TrainSummary a = run_finetune(big);
  const TrainSummary b = run_finetune(accumulated);
  EXPECT_NEAR(a.test_loss, b.test_loss, 1e-4);
  const train::LoadedCheckpoint ca((root_ / "big" / "checkpoint.pt").string());
  const train::LoadedCheckpoint cb((root_ / "accumulated" / "checkpoint.pt").string());
  EXPECT_EQ(ca.global_step(), cb.global_step());
  for (size_t i = 0; i < ca.model_tensors().size(); ++i)
    EXPECT_TRUE(torch::allclose(ca.model_tensors()[i].second, cb.model_tensors()[i].second, 1e-4, 1e-5))
        << ca.model_tensors()[i].first;
  // And not the same as one step per 32-image batch.
  TrainConfig small = accumulated;
  small.output_dir = (root_ / "small").string();
  small.accum_iter = 1;
  const TrainSummary s = run_finetune(small);
  EXPECT_GT(std::abs(s.test_loss - a.test_loss), 1e-4);
}

TEST_F(FinetuneEngineTest, AttentionConfigIsReadOnceAndTravelsVerbatim) {
  TrainConfig c = config("run");
  c.epochs = 1;
  c.attn_cfg = (root_ / "missing.yaml").string();
  try {
    run_finetune(c);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.yaml"), std::string::npos) << e.what();
  }
  const std::string text = "# comment kept verbatim\nattention:\n  backend: vit\n  mask: local\n  mask_kwargs: {window: 3}\n";
  c.attn_cfg = write("local.yaml", text);
  run_finetune(c);
  const train::LoadedCheckpoint ck((root_ / "run" / "checkpoint.pt").string());
  const std::optional<models::ClassifierDescription> m = checkpoint_classifier(ck);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->attention.yaml, text);
  EXPECT_EQ(m->attention.spec.mask, "local");
  std::ifstream saved(root_ / "run" / "attention.yaml");
  std::stringstream saved_text;
  saved_text << saved.rdbuf();
  EXPECT_EQ(saved_text.str(), text);
}

}  // namespace
}  // namespace sparsevit::pipelines
