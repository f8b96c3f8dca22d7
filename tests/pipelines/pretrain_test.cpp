// `sparsevit pretrain` end to end on the synthetic dataset: the loss falls, resuming is exact,
// reconstruction PNGs are written, the checkpoint exports under MAE's names and finetunes: the
// encoder's weights arrive in the ViT, the decoder is left out.
#include "pipelines/pretrain.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/masked_autoencoder.h"
#include "models/model_registry.h"
#include "models/pretrained_weights.h"
#include "pipelines/finetune.h"
#include "support/synthetic_training.h"
#include "train/checkpoint.h"
#include "weights/weight_file.h"

namespace sparsevit::pipelines {
namespace {

class PretrainTest : public testing::SyntheticTrainingTest {
 protected:
  PretrainTest() : SyntheticTrainingTest("vit_nano_patch4_28", 256, 1) {}

  TrainConfig pretrain_config(const std::string& out) const {
    TrainConfig c = pretrain_defaults();
    const TrainConfig base = config(out);
    c.dataset = base.dataset;
    c.data_path = base.data_path;
    c.output_dir = base.output_dir;
    c.num_workers = base.num_workers;
    c.threads = 2;
    c.batch_size = 32;
    c.epochs = 3;
    c.lr = 2e-3;
    c.warmup_epochs = 0.5;
    c.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_fibottention_small.yaml";
    return c;
  }
};

TEST_F(PretrainTest, LossFallsAndReconstructionsAreWritten) {
  TrainConfig c = pretrain_config("full");
  c.save_recon = (root_ / "recon").string();
  const PretrainSummary full = run_pretrain(c);
  EXPECT_EQ(full.epochs_run, 3);
  EXPECT_LT(full.train_loss, 0.8 * full.first_epoch_loss);
  EXPECT_EQ(full.encoder_tokens, 13);  // int(49 * 0.25) visible patches + class
  EXPECT_EQ(full.decoder_tokens, 50);
  EXPECT_GT(full.attention_gflops_encoder, 0);
  EXPECT_TRUE(std::filesystem::exists(root_ / "recon" / "recon_00.png"));
  EXPECT_TRUE(std::filesystem::exists(root_ / "full" / "metrics.jsonl"));

}

TEST_F(PretrainTest, ResumeContinuesBitExactly) {
  TrainConfig a = pretrain_config("a");
  a.epochs = 2;
  const PretrainSummary whole = run_pretrain(a);
  // Same run interrupted after epoch 1: copy its epoch-0 checkpoint and resume.
  TrainConfig b = pretrain_config("b");
  b.epochs = 2;
  b.save_ckpt_freq = 1;
  run_pretrain(b);
  TrainConfig c = pretrain_config("c");
  c.epochs = 2;
  c.resume = (root_ / "b" / "checkpoint-0.pt").string();
  const PretrainSummary resumed = run_pretrain(c);
  EXPECT_EQ(resumed.epochs_run, 1);
  EXPECT_DOUBLE_EQ(resumed.train_loss, whole.train_loss);
  const train::LoadedCheckpoint x((root_ / "a" / "checkpoint.pt").string()), y((root_ / "c" / "checkpoint.pt").string());
  ASSERT_EQ(x.model_tensors().size(), y.model_tensors().size());
  for (std::size_t i = 0; i < x.model_tensors().size(); ++i)
    EXPECT_TRUE(x.model_tensors()[i].second.equal(y.model_tensors()[i].second)) << x.model_tensors()[i].first;
}

TEST_F(PretrainTest, TheEncoderFinetunesAndExportsUnderMaesNames) {
  TrainConfig p = pretrain_config("pre");
  p.epochs = 1;
  run_pretrain(p);
  const std::string ckpt = (root_ / "pre" / "checkpoint.pt").string();
  const train::LoadedCheckpoint loaded(ckpt);
  const std::optional<LoadedMae> mae = load_checkpoint_mae(loaded);
  ASSERT_TRUE(mae.has_value());
  EXPECT_EQ(mae->name, "mae_vit_nano_patch4_28");

  // Into a ViT: encoder weights by name; decoder and mask token unexpected; the head re-initialised.
  auto vit = models::create_model("vit_nano_patch4_28", {});
  const models::PretrainedLoad load = models::load_pretrained_file(*vit, ckpt);
  EXPECT_TRUE(vit->named_parameters()["blocks.5.attn.qkv.weight"].equal(
      mae->model->named_parameters()["blocks.5.attn.qkv.weight"]));
  EXPECT_TRUE(vit->named_parameters()["pos_embed"].equal(mae->model->named_parameters()["pos_embed"]));
  EXPECT_EQ(load.missing, (std::vector<std::string>{"head.weight", "head.bias"}));
  EXPECT_TRUE(load.head_reinitialised);
  EXPECT_LT(vit->named_parameters()["head.weight"].abs().max().item<double>(), 1e-3);
  EXPECT_NE(std::find(load.unexpected.begin(), load.unexpected.end(), "mask_token"), load.unexpected.end());

  // The whole finetune pipeline from it.
  TrainConfig f = config("ft");
  f.epochs = 1;
  f.finetune = ckpt;
  EXPECT_EQ(run_finetune(f).epochs_run, 1);
}

}  // namespace
}  // namespace sparsevit::pipelines
