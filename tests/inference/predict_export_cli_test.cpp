// `predict` and `export` as a user runs them: a model finetuned on an image folder, exported to
// safetensors and .pth, predicted from the checkpoint and from each exported file (same logits),
// on images (a folder and one file) and on a .npy tensor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "data/image_codec.h"
#include "support/cli_runner.h"
#include "util/npy_file.h"
#include "weights/safetensors_file.h"
#include "weights/weight_file.h"

namespace sparsevit {
namespace {

using namespace sparsevit::testing;

at::Tensor read_logits(const std::string& path) {
  const NpyFloat32 a = read_npy_float32(path, "test");
  return at::from_blob(const_cast<float*>(a.values.data()), a.shape, at::kFloat).clone();
}

TEST(PredictExportCli, ExportedWeightsPredictLikeTheCheckpoint) {
  TempDir dir;
  for (const char* split : {"train", "val"})
    for (int cls = 0; cls < 2; ++cls) {
      const fs::path folder = dir.path() / "data" / split / (cls == 0 ? "cat" : "dog");
      fs::create_directories(folder);
      for (int i = 0; i < 4; ++i) {
        data::Image image{28, 28, 3, std::vector<uint8_t>(28 * 28 * 3)};
        for (std::size_t p = 0; p < image.pixels.size(); ++p) image.pixels[p] = static_cast<uint8_t>(cls * 120 + (p * 31 + i) % 100);
        data::write_png((folder / ("img" + std::to_string(i) + ".png")).string(), image);
      }
    }
  const std::string run_dir = (dir.path() / "run").string();
  const Result train = run("finetune --dataset image_folder --data_path " + quote((dir.path() / "data").string()) +
                           " --model vit_nano_patch4_28 --epochs 1 --batch_size 4 --threads 1 --global_pool"
                           " --attn-cfg configs/attention/vit_fibottention_small.yaml --output_dir " + quote(run_dir));
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  const std::string ckpt = run_dir + "/checkpoint.pt";
  for (const char* format : {"safetensors", "pth"}) {
    const Result e = run("export --resume " + quote(ckpt) + " --format " + format + " --output " +
                         quote(run_dir + "/model." + format));
    ASSERT_EQ(e.exit_code, 0) << e.describe();
    EXPECT_NE(e.out.find("vit_nano_patch4_28"), std::string::npos) << e.describe();
  }
  const weights::NamedTensors exported = weights::read_weight_file(run_dir + "/model.safetensors");
  EXPECT_EQ(exported.front().first, "cls_token");
  // The model's description rides in the safetensors metadata (sparsevit.models.load rebuilds it).
  const auto metadata = weights::read_safetensors(run_dir + "/model.safetensors").metadata;
  ASSERT_EQ(metadata.count("sparsevit_model"), 1u);
  const auto description = nlohmann::json::parse(metadata.at("sparsevit_model"));
  EXPECT_EQ(description.at("model"), "vit_nano_patch4_28");
  EXPECT_TRUE(description.at("model_shape").at("global_pool").get<bool>());
  EXPECT_NE(description.at("attention_yaml").get<std::string>().find("fibo"), std::string::npos);
  for (const auto& [name, t] : exported) EXPECT_EQ(name.find("row_ptr"), std::string::npos) << "buffers are not exported";

  // The same inputs through the checkpoint and through each exported file.
  const std::string npy = (dir.path() / "x.npy").string();
  const at::Tensor x = torch::randn({3, 1, 28, 28});
  write_npy_float32(npy, {3, 1, 28, 28}, std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + x.numel()));
  const Result from_ckpt = run("predict --resume " + quote(ckpt) + " --input " + quote(npy) + " --output " +
                               quote(run_dir + "/a.npy") + " --threads 1 --topk 2");
  ASSERT_EQ(from_ckpt.exit_code, 0) << from_ckpt.describe();
  EXPECT_NE(from_ckpt.out.find("x.npy[2]:"), std::string::npos) << from_ckpt.describe();
  for (const char* format : {"safetensors", "pth"}) {
    const Result r = run("predict --weights " + quote(run_dir + "/model." + format) +
                         " --model vit_nano_patch4_28 --attn-cfg configs/attention/vit_fibottention_small.yaml --input " +
                         quote(npy) + " --output " + quote(run_dir + "/b.npy") + " --threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(read_logits(run_dir + "/a.npy").equal(read_logits(run_dir + "/b.npy"))) << format;
  }
  // Images: a folder (names relative to it) and one file, through the training normalisation.
  const Result folder = run("predict --resume " + quote(ckpt) + " --input " + quote((dir.path() / "data" / "val").string()));
  ASSERT_EQ(folder.exit_code, 0) << folder.describe();
  EXPECT_NE(folder.out.find("cat/img0.png:"), std::string::npos) << folder.describe();
  EXPECT_NE(folder.out.find("dog/img3.png:"), std::string::npos) << folder.describe();
  const Result one = run("predict --resume " + quote(ckpt) + " --input " +
                         quote((dir.path() / "data" / "val" / "dog" / "img1.png").string()));
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  expect_usage_error(run("predict --resume " + quote(ckpt) + " --input " + quote(run_dir + "/missing.png")), "does not exist");
  expect_usage_error(run("predict --input " + quote(npy)), "--resume CKPT or --weights FILE");
}

}  // namespace
}  // namespace sparsevit
