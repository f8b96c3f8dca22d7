// benchmarks/: the whole-model benchmark (bench --model), image and video models, and the per-op
// step profiler.
#include "benchmarks/model_benchmark.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "benchmarks/op_profiler.h"
#include "util/errors.h"
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
  EXPECT_GT(r.sparse.samples_per_second, 0.0);
  EXPECT_NEAR(r.sparse.samples_per_second, 4 / (r.sparse.median_ms / 1e3), 1e-6);
  EXPECT_GT(r.dense.peak_extra_bytes, 0);
  // The quickstart config at N = 50 (pinned in the README): pruning 0.92 against dense's 0.
  EXPECT_NEAR(r.sparse.pruning_ratio, 0.92, 0.005);
  EXPECT_EQ(r.dense.pruning_ratio, 0.0);
  EXPECT_LT(r.sparse.attention_gflops, r.dense.attention_gflops);
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["pass"], "train_step");
  EXPECT_TRUE(j["dense"].contains("images_per_second"));
  EXPECT_FALSE(r.is_video());
  EXPECT_FALSE(j.contains("num_frames"));
}

// timesformer_nano_patch4_28 cut to one block and 2 frames: clips [B, 1, 2, 28, 28].
ModelBenchmarkOptions video_options() {
  ModelBenchmarkOptions o = small_options();
  o.model = "timesformer_nano_patch4_28";
  o.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/video/timesformer_fibottention_modified.yaml";
  o.overrides = {"w_max=49"};
  o.depth = 1;
  o.num_frames = 2;
  o.batch = 2;
  o.repeats = 1;
  o.warmup = 0;
  return o;
}

TEST(ModelBenchmark, VideoModelTimesClipsOfDenseAndSparseSpatialAttention) {
  for (bool backward : {false, true}) {
    ModelBenchmarkOptions o = video_options();
    o.backward = backward;
    const ModelBenchmarkResult r = run_model_benchmark(o);
    ASSERT_TRUE(r.is_video());
    ASSERT_TRUE(r.dense.ran);
    ASSERT_TRUE(r.sparse.ran);
    EXPECT_EQ(r.tokens, 50);  // one frame's 49 patches + the class token
    EXPECT_EQ(r.video_layout->num_frames, 2);
    EXPECT_EQ(r.video_layout->spatial_sequences, 2);
    EXPECT_EQ(r.video_layout->temporal_sequences, 49);
    EXPECT_NEAR(r.sparse.samples_per_second, 2 / (r.sparse.median_ms / 1e3), 1e-6);
    EXPECT_GT(r.dense.peak_extra_bytes, 0);
    EXPECT_EQ(r.dense.pruning_ratio, 0.0);
    EXPECT_GT(r.sparse.pruning_ratio, 0.5);
    EXPECT_LT(r.sparse.attention_gflops, r.dense.attention_gflops);
    // The GFLOPs split is the caller's (analysis::video_attention_report): absent here.
    EXPECT_FALSE(r.sparse.video_gflops.has_value());
    const nlohmann::json j = r.to_json();
    EXPECT_EQ(j["pass"], backward ? "train_step" : "forward");
    EXPECT_EQ(j["num_frames"], 2);
    EXPECT_EQ(j["attention_type"], "divided_space_time");
    EXPECT_EQ(j["temporal_config"], "dense");
    EXPECT_TRUE(j["sparse"].contains("clips_per_second"));
    EXPECT_FALSE(j["sparse"].contains("images_per_second"));
    EXPECT_NEAR(j["sparse_vs_dense"]["attention_gflops"].get<double>(),
                r.sparse.attention_gflops / r.dense.attention_gflops, 1e-12);
    const std::string text = r.to_text();
    for (const char* field : {"clips/s", "spatial GF", "temporal GF", "sparse / dense:", "2 frames"})
      EXPECT_NE(text.find(field), std::string::npos) << field << "\n" << text;
  }
}

TEST(ModelBenchmark, VideoAttentionTypesSetTheSequences) {
  ModelBenchmarkOptions o = video_options();
  o.backward = false;
  o.attention_type = "joint_space_time";
  ModelBenchmarkResult r = run_model_benchmark(o);
  EXPECT_EQ(r.tokens, 1 + 49 * 2);  // the whole clip is one sequence
  EXPECT_EQ(r.video_layout->spatial_sequences, 1);
  EXPECT_FALSE(r.video_layout->temporal.has_value());
  EXPECT_EQ(r.to_json()["temporal_config"], "none");
  o.attention_type = "space_only";
  r = run_model_benchmark(o);
  EXPECT_EQ(r.tokens, 50);
  EXPECT_EQ(r.video_layout->spatial_sequences, 2);
  EXPECT_EQ(r.video_layout->temporal_sequences, 0);
}

TEST(ModelBenchmark, VideoOptionsThatDoNotApplyAreUsageErrors) {
  auto message = [](const ModelBenchmarkOptions& o) {
    try {
      run_model_benchmark(o);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no UsageError");
  };
  ModelBenchmarkOptions image = small_options();
  image.num_frames = 4;
  EXPECT_NE(message(image).find("--num-frames applies to video models"), std::string::npos) << message(image);
  image = small_options();
  image.attention_type = "space_only";
  EXPECT_NE(message(image).find("--attention-type"), std::string::npos) << message(image);
  image = small_options();
  image.temporal_attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_dense.yaml";
  EXPECT_NE(message(image).find("--temporal-attn-cfg"), std::string::npos) << message(image);

  ModelBenchmarkOptions video = video_options();
  video.attention_type = "space_only";
  video.temporal_attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_dense.yaml";
  EXPECT_NE(message(video).find("--temporal-attn-cfg applies to divided_space_time"), std::string::npos)
      << message(video);
  video = video_options();
  video.attention_type = "spatial_only";
  EXPECT_NE(message(video).find("spatial_only"), std::string::npos) << message(video);
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
