// benchmarks/: the whole-model benchmark (bench --model) and the per-op step profiler.
#include "benchmarks/model_benchmark.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "benchmarks/op_profiler.h"
#include "util/linear.h"

namespace sparsevit::benchmarks {
namespace {

ModelBenchmarkOptions small_options() {
  ModelBenchmarkOptions o;
  o.model = "vit_nano_patch4_28";
  o.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_fibottention_small.yaml";
  o.batch = 4;
  o.threads = 2;
  o.repeats = 2;
  o.warmup = 1;
  o.backward = true;
  return o;
}

TEST(ModelBenchmark, TimesBothModelsAndReportsTheirBudgets) {
  const ModelBenchmarkResult r = run_model_benchmark(small_options());
  ASSERT_TRUE(r.dense.ran);
  ASSERT_TRUE(r.sparse.ran);
  EXPECT_EQ(r.tokens, 50);
  EXPECT_EQ(r.dense.step_ms.size(), 2u);
  EXPECT_GT(r.sparse.images_per_second, 0.0);
  EXPECT_NEAR(r.sparse.images_per_second, 4 / (r.sparse.median_ms / 1e3), 1e-6);
  EXPECT_GT(r.dense.peak_extra_bytes, 0);
  // The quickstart config at N = 50 (pinned in the README): pruning 0.92 against dense's 0.
  EXPECT_NEAR(r.sparse.pruning_ratio, 0.92, 0.005);
  EXPECT_EQ(r.dense.pruning_ratio, 0.0);
  EXPECT_LT(r.sparse.attention_gflops, r.dense.attention_gflops);
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["pass"], "train_step");
  EXPECT_TRUE(j["dense"].contains("images_per_second"));
}

TEST(ModelBenchmark, BreakdownAttributesTheStepToItsParts) {
  ModelBenchmarkOptions o = small_options();
  o.breakdown = true;
  o.profile_steps = 1;
  const ModelBenchmarkResult r = run_model_benchmark(o);
  for (const ModelTiming* t : {&r.dense, &r.sparse}) {
    double sum = 0;
    for (const auto& [part, s] : t->part_seconds) sum += s;
    EXPECT_NEAR(sum, t->profiled_step_seconds, 1e-3 * t->profiled_step_seconds + 1e-6) << t->name;
    for (const char* part : {"linear_gemm", "attention", "layer_norm", "gelu", "optimizer", "patch_embedding"})
      EXPECT_GT(t->part_seconds.count(part) ? t->part_seconds.at(part) : 0.0, 0.0) << t->name << " " << part;
  }
  // Dense attention runs as batched matmuls, the sparse model through the operator.
  EXPECT_GT(r.dense.op_seconds.count("aten::bmm"), 0u);
  EXPECT_EQ(r.sparse.op_seconds.count("aten::bmm"), 0u);
  bool sparse_op = false;
  for (const auto& [name, s] : r.sparse.op_seconds) sparse_op |= name.find("sparsevit::") == 0;
  EXPECT_TRUE(sparse_op);
}

TEST(ModelBenchmark, Bfloat16AutocastRunsAndBadAmpIsRefused) {
  ModelBenchmarkOptions o = small_options();
  o.amp = "bf16";
  EXPECT_TRUE(run_model_benchmark(o).sparse.ran);
  o.amp = "fp8";
  EXPECT_THROW(run_model_benchmark(o), std::exception);
}

TEST(OpProfiler, LinearOnTokensIsOneAddmmWithTheBiasFused) {
  // What util/linear.h relies on: at::linear runs a contiguous [B, N, C] input as one addmm (the
  // C++ module's forward would be mm + add).
  torch::nn::Linear layer(8, 4);
  const at::Tensor x = at::randn({2, 5, 8});
  OpProfiler profiler;
  const at::Tensor y = linear(layer, x);
  const auto ops = profiler.totals();
  EXPECT_EQ(ops.count("aten::addmm"), 1u);
  EXPECT_EQ(ops.count("aten::mm"), 0u);
  EXPECT_TRUE(at::allclose(y, layer->forward(x), 1e-5, 1e-6));
}

TEST(OpProfiler, PartsOfKnownOps) {
  EXPECT_EQ(step_part_of_op("aten::addmm"), "linear_gemm");
  EXPECT_EQ(step_part_of_op("aten::bmm"), "attention");
  EXPECT_EQ(step_part_of_op("aten::_log_softmax_backward_data"), "loss");
  EXPECT_EQ(step_part_of_op("sparsevit::_sparse_attention_backward"), "attention");
  EXPECT_EQ(step_part_of_op("aten::native_layer_norm_backward"), "layer_norm");
  EXPECT_EQ(step_part_of_op("aten::gelu_backward"), "gelu");
  EXPECT_EQ(step_part_of_op("aten::copy_"), "layout_copies");
  EXPECT_EQ(step_part_of_op("phase:optimizer/aten::addcdiv_"), "optimizer");
  EXPECT_EQ(step_part_of_op("aten::mkldnn_convolution"), "patch_embedding");
}

}  // namespace
}  // namespace sparsevit::benchmarks
