// The commands researchers already have, run with `sparsevit finetune` in place of
// `python -m main_finetune` on a tiny ImageFolder (train/ + val/, two classes of 32x32 PNGs):
// the reference implementation's own command and MAE's finetune command with a .pth written by
// PyTorch's format, with every flag as documented. Only the sizes differ (input 32, one block,
// two epochs) so that ViT-B runs in seconds; the flag set is verbatim.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/image_codec.h"
#include "models/model_registry.h"
#include "models/pretrained_weights.h"
#include "support/cli_runner.h"
#include "weights/weight_file.h"

namespace sparsevit {
namespace {

using namespace sparsevit::testing;

// train/{a,b}/ 6 images each, val/{a,b}/ 2 each: class a dark, class b bright.
void write_tiny_image_folder(const fs::path& root) {
  for (const char* split : {"train", "val"})
    for (int cls = 0; cls < 2; ++cls) {
      const fs::path dir = root / split / (cls == 0 ? "a" : "b");
      fs::create_directories(dir);
      for (int i = 0; i < (std::string(split) == "train" ? 6 : 2); ++i) {
        data::Image image{32, 32, 3, std::vector<uint8_t>(32 * 32 * 3)};
        for (std::size_t p = 0; p < image.pixels.size(); ++p)
          image.pixels[p] = static_cast<uint8_t>((cls == 0 ? 40 : 200) + (p * 7 + i * 13) % 40);
        data::write_png((dir / ("img" + std::to_string(i) + ".png")).string(), image);
      }
    }
}

TEST(DocumentedCommands, TheReferenceImplementationsFinetuneCommand) {
  TempDir dir;
  write_tiny_image_folder(dir.path() / "imagenet");
  const std::string run_dir = (dir.path() / "runs" / "fibo_exp1").string();
  const Result r = run("finetune --dataset imagenet --data_path " + quote((dir.path() / "imagenet").string()) +
                       " --model vit_base_patch16 --nb_classes 1000 --epochs 2 --batch_size 64 --blr 1e-3"
                       " --attn-cfg configs/attention/vit_fibottention.yaml --output_dir " + quote(run_dir) +
                       " --log_dir " + quote(run_dir) + " --input_size 32 --depth 1 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  EXPECT_EQ(summary["epochs"].get<int>(), 2);
  EXPECT_TRUE(fs::exists(run_dir + "/checkpoint.pt"));
  EXPECT_TRUE(fs::exists(run_dir + "/metrics.jsonl"));
}

TEST(DocumentedCommands, MaesFinetuneCommandFromATorchSaveFile) {
  TempDir dir;
  write_tiny_image_folder(dir.path() / "imagenet");
  // An MAE-style .pth ({"model": ...} is what MAE publishes; here a plain state dict of the
  // same encoder with a 1000-class head, which --nb_classes 2 drops and re-initialises).
  models::ModelOptions o;
  o.img_size = 32;
  o.depth = 1;
  auto pretrained = models::create_model("vit_base_patch16", o);
  const std::string pth = (dir.path() / "mae_pretrain_vit_base.pth").string();
  weights::write_weight_file(pth, models::exported_parameters(*pretrained), weights::WeightFormat::pth);
  const Result r = run("finetune --batch_size 64 --model vit_base_patch16 --finetune " + quote(pth) +
                       " --epochs 2 --blr 5e-4 --layer_decay 0.65 --weight_decay 0.05 --drop_path 0.1 --reprob 0.25"
                       " --mixup 0.8 --cutmix 1.0 --dist_eval --data_path " + quote((dir.path() / "imagenet").string()) +
                       " --input_size 32 --depth 1 --nb_classes 2 --global_pool --threads 2 --device cpu");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("--finetune"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("removed (class count differs): head.weight, head.bias"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("missing: fc_norm.weight, fc_norm.bias"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("top-1 accuracy"), std::string::npos) << r.describe();
}

TEST(DocumentedCommands, CudaAndBadWeightFilesAreClearErrors) {
  TempDir dir;
  write_tiny_image_folder(dir.path() / "imagenet");
  expect_usage_error(run("finetune --device cuda --epochs 1"), "--device cuda");
  const std::string bad = dir.file("weights.pth", "PK\x03\x04 not really a zip");
  const Result r = run("finetune --finetune " + quote(bad) + " --epochs 1 --threads 1 --model vit_nano_patch4_28 --data_path " +
                       quote((dir.path() / "imagenet").string()));
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_NE(r.err.find("weights.pth"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace sparsevit
