// `predict` against an independent implementation: weight files written by PyTorch (torch.save,
// MAE's {"model": ...} layout) and by a from-the-spec safetensors writer, and the logits the float64
// reference (tests/golden/vit_reference.py) computes from them on the same .npy input
// (tests/golden/make_predict_golden.py). Dense, the published Fibottention masks, and MAE's
// global-pool head; the shape (classes, width, depth, patch, input size, channels, pooling) is read
// off the weights, only the heads are given.
#include "inference/predict.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "util/errors.h"
#include "util/npy_file.h"

namespace sparsevit::inference {
namespace {

const std::string kDir = std::string(SPARSEVIT_SOURCE_DIR) + "/tests/golden/predict/";

PredictOptions tiny_options(const std::string& weights) {
  PredictOptions p;
  p.weights = kDir + weights;
  p.input = kDir + "input.npy";
  p.model.model = "vit_tiny_patch16_224";
  p.model.num_heads = 2;
  p.model.threads = 1;
  return p;
}

at::Tensor expected(const std::string& name) {
  const NpyFloat32 a = read_npy_float32(kDir + "logits_" + name + ".npy", "test");
  return at::from_blob(const_cast<float*>(a.values.data()), a.shape, at::kFloat).clone();
}

void expect_logits(const PredictOptions& p, const std::string& name) {
  const Predictions out = run_predict(p);
  ASSERT_EQ(out.logits.sizes(), (at::IntArrayRef{4, 5}));
  const double diff = (out.logits - expected(name)).abs().max().item<double>();
  EXPECT_LT(diff, 1e-4) << p.weights << " " << name;
  EXPECT_EQ(out.names.front(), "input.npy[0]");
}

TEST(PredictGolden, DenseFromTorchSaveMaeLayoutAndSafetensors) {
  for (const char* file : {"vit.pth", "vit_mae.pth", "vit.safetensors"}) expect_logits(tiny_options(file), "dense");
}

TEST(PredictGolden, PublishedFibottentionMasks) {
  PredictOptions p = tiny_options("vit.safetensors");
  const std::string yaml = ::testing::TempDir() + "/fibo_reference.yaml";
  {
    std::ofstream(yaml) << "attention: {backend: vit, mask: fibo, mask_kwargs: {compat: reference}, kernel: sparse}\n";
  }
  p.model.attn_cfg = yaml;
  expect_logits(p, "fibo_reference");
  p.weights = kDir + "vit.pth";
  expect_logits(p, "fibo_reference");
}

TEST(PredictGolden, GlobalPoolHeadIsReadOffTheWeights) { expect_logits(tiny_options("vit_gap.safetensors"), "gap"); }

TEST(PredictGolden, LogitsFileAndTopk) {
  PredictOptions p = tiny_options("vit.safetensors");
  p.output = ::testing::TempDir() + "/logits.npy";
  const Predictions out = run_predict(p);
  const NpyFloat32 written = read_npy_float32(p.output, "test");
  EXPECT_EQ(written.shape, (std::vector<int64_t>{4, 5}));
  EXPECT_FLOAT_EQ(written.values[7], out.logits[1][2].item<float>());
  const std::string text = format_topk(out, 2);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
  EXPECT_NE(text.find("input.npy[0]:"), std::string::npos);
}

TEST(PredictGolden, WeightsThatDoNotFitTheModelAreUsageErrors) {
  PredictOptions p = tiny_options("vit.safetensors");
  p.model.num_heads = 3;  // 16 is not a multiple of 3
  EXPECT_THROW(run_predict(p), UsageError);
  p = tiny_options("vit.safetensors");
  p.model.depth = 3;  // the file has 2 blocks: blocks.2.* would stay random
  EXPECT_THROW(run_predict(p), UsageError);
  p = tiny_options("vit.safetensors");
  p.model.input_size = 32;  // the .npy holds 16x16 images
  p.model.patch_size = 4;
  EXPECT_THROW(run_predict(p), UsageError);
  p = tiny_options("vit.safetensors");
  p.resume = kDir + "vit.pth";  // both
  EXPECT_THROW(run_predict(p), UsageError);
}

}  // namespace
}  // namespace sparsevit::inference
