// Unit tests of the TimeSformer (models/timesformer.h) and its attention layout
// (models/video_attention_layout.h): shapes, gradients, TimeSformer's parameter names and init,
// what the zero-initialised temporal_fc implies, which attention config reaches which attention,
// the GFLOPs it reports, the registry and the attention-map inputs. The logits themselves are
// checked against an independent reference in timesformer_golden_test.cpp.
#include "models/timesformer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "models/model_registry.h"
#include "models/video_attention_layout.h"
#include "models_test_util.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

using namespace test_util;  // kImg ... kClasses, spec_of, contains

constexpr int64_t kFrames = 4;
constexpr int64_t kP = (kImg / kPatch) * (kImg / kPatch);  // 16 patches per frame
constexpr int64_t kN = kP + 1;                             // tokens per frame

const VideoAttentionType kTypes[] = {VideoAttentionType::kDividedSpaceTime, VideoAttentionType::kSpaceOnly,
                                     VideoAttentionType::kJointSpaceTime};

const char* kSpatialSparse = "attention: {backend: vit, mask: local, mask_kwargs: {head_windows: [1, 2]}, kernel: sparse}";
const char* kTemporalSparse =
    "attention: {backend: vit, mask: local, mask_kwargs: {head_windows: [1, 2], include_diagonal: true}, kernel: sparse}";


TimeSformerConfig tiny_config(VideoAttentionType type, const std::string& spatial_yaml = "",
                              const std::string& temporal_yaml = "") {
  TimeSformerConfig c;
  c.vit.img_size = kImg;
  c.vit.patch_size = kPatch;
  c.vit.in_chans = kChans;
  c.vit.num_classes = kClasses;
  c.vit.embed_dim = kDim;
  c.vit.depth = kDepth;
  c.vit.num_heads = kHeads;
  if (!spatial_yaml.empty()) c.vit.attention = spec_of(spatial_yaml);
  if (!temporal_yaml.empty()) c.temporal_attention = spec_of(temporal_yaml);
  c.num_frames = kFrames;
  c.attention_type = type;
  return c;
}

std::shared_ptr<TimeSformer> tiny_model(VideoAttentionType type, const std::string& spatial_yaml = "",
                                        const std::string& temporal_yaml = "") {
  auto model = std::make_shared<TimeSformer>(tiny_config(type, spatial_yaml, temporal_yaml));
  model->eval();
  return model;
}

at::Tensor tiny_clips(int64_t batch) { return torch::randn({batch, kChans, kFrames, kImg, kImg}); }

bool is_temporal(const std::string& name) { return contains(name, ".temporal_"); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

// Gradients of a scalar loss on the logits for every parameter.
void backward_on(TimeSformer& model) {
  model.zero_grad();
  const at::Tensor loss = model.forward(tiny_clips(2)).logsumexp(1).sum();
  loss.backward();
}

double grad_abs_sum(const at::Tensor& p) { return p.grad().abs().sum().item<double>(); }

TEST(TimeSformer, ForwardShapeForEveryAttentionType) {
  torch::manual_seed(0);
  for (VideoAttentionType type : kTypes) {
    SCOPED_TRACE(video_attention_name(type));
    auto model = tiny_model(type);
    const at::Tensor x = tiny_clips(3);
    EXPECT_EQ(model->forward(x).sizes(), (at::IntArrayRef{3, kClasses}));
    EXPECT_EQ(model->forward_features(x).sizes(), (at::IntArrayRef{3, kDim}));
    EXPECT_EQ(model->num_frames(), kFrames);
    EXPECT_EQ(model->input_shape(), (std::vector<int64_t>{kChans, kFrames, kImg, kImg}));
  }
}

// Every parameter gets a finite gradient, non-zero except where the zero-initialised temporal_fc
// blocks it: temporal_attn and temporal_norm1 feed the model only through temporal_fc's weight,
// so at init their gradients are exactly zero while temporal_fc's own are not.
TEST(TimeSformer, BackwardGivesFiniteGradientsToEveryParameter) {
  torch::manual_seed(1);
  for (VideoAttentionType type : kTypes) {
    SCOPED_TRACE(video_attention_name(type));
    auto model = tiny_model(type);
    backward_on(*model);
    for (const auto& p : model->named_parameters()) {
      SCOPED_TRACE(p.key());
      ASSERT_TRUE(p.value().grad().defined());
      EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>());
      const bool blocked = contains(p.key(), ".temporal_attn.") || contains(p.key(), ".temporal_norm1.");
      if (blocked)
        EXPECT_EQ(grad_abs_sum(p.value()), 0.0);
      else
        EXPECT_GT(grad_abs_sum(p.value()), 0.0);
    }
  }
}

TEST(TimeSformer, TemporalAttentionGetsGradientsOnceTemporalFcIsNonZero) {
  torch::manual_seed(2);
  auto model = tiny_model(VideoAttentionType::kDividedSpaceTime);
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : model->named_parameters())
      if (contains(p.key(), ".temporal_fc.")) p.value().normal_(0.0, 0.1);
  }
  backward_on(*model);
  int64_t temporal = 0;
  for (const auto& p : model->named_parameters()) {
    SCOPED_TRACE(p.key());
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>());
    EXPECT_GT(grad_abs_sum(p.value()), 0.0);
    temporal += is_temporal(p.key());
  }
  EXPECT_EQ(temporal, kDepth * 8);  // per block: temporal_norm1 (2), temporal_attn qkv + proj (4), temporal_fc (2)
}

// TimeSformer's (facebookresearch/TimeSformer models/vit.py) state-dict names, exactly.
std::set<std::string> expected_names(VideoAttentionType type) {
  std::set<std::string> names = {"patch_embed.proj.weight", "patch_embed.proj.bias", "cls_token", "pos_embed",
                                 "norm.weight", "norm.bias", "head.weight", "head.bias"};
  if (type != VideoAttentionType::kSpaceOnly) names.insert("time_embed");
  for (int64_t i = 0; i < kDepth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    std::vector<std::string> modules = {"norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"};
    if (type == VideoAttentionType::kDividedSpaceTime)
      for (const char* m : {"temporal_norm1", "temporal_attn.qkv", "temporal_attn.proj", "temporal_fc"}) modules.push_back(m);
    for (const auto& m : modules)
      for (const char* w : {".weight", ".bias"}) names.insert(b + m + w);
  }
  return names;
}

TEST(TimeSformer, ParameterNamesAreTimeSformers) {
  for (VideoAttentionType type : kTypes) {
    SCOPED_TRACE(video_attention_name(type));
    auto model = tiny_model(type);
    std::set<std::string> names;
    for (const auto& p : model->named_parameters()) names.insert(p.key());
    EXPECT_EQ(names, expected_names(type));
    EXPECT_EQ(model->named_parameters().contains("time_embed"), type != VideoAttentionType::kSpaceOnly);
    if (type != VideoAttentionType::kSpaceOnly) {
      EXPECT_EQ(model->named_parameters()["time_embed"].sizes(), (at::IntArrayRef{1, kFrames, kDim}));
    }
    EXPECT_EQ(model->named_parameters()["pos_embed"].sizes(), (at::IntArrayRef{1, kN, kDim}));
    EXPECT_EQ(model->named_parameters()["cls_token"].sizes(), (at::IntArrayRef{1, 1, kDim}));
  }
}

TEST(TimeSformer, InitialisationIsTimeSformers) {
  torch::manual_seed(3);
  for (VideoAttentionType type : kTypes) {
    SCOPED_TRACE(video_attention_name(type));
    auto model = tiny_model(type);
    int64_t temporal_fc = 0, norms = 0;
    for (const auto& p : model->named_parameters()) {
      SCOPED_TRACE(p.key());
      const at::Tensor& v = p.value();
      const std::string& key = p.key();
      const std::string module = key.substr(0, key.rfind('.'));
      const std::string leaf = module.substr(module.rfind('.') + 1);  // the whole name when it has no '.'
      if (key == "time_embed") {
        EXPECT_TRUE(v.eq(0).all().item<bool>());
      } else if (contains(key, ".temporal_fc.")) {
        EXPECT_TRUE(v.eq(0).all().item<bool>());
        ++temporal_fc;
      } else if (leaf == "norm" || leaf == "norm1" || leaf == "norm2" || leaf == "temporal_norm1") {
        // LayerNorms: weight 1, bias 0.
        EXPECT_TRUE(v.eq(contains(key, ".weight") ? 1.0 : 0.0).all().item<bool>());
        ++norms;
      } else if (key == "pos_embed") {
        // trunc_normal(std 0.02) (timm's cut at +-2 is ~100 std away): 272 samples.
        EXPECT_NEAR(v.std().item<double>(), 0.02, 0.005);
      } else if (key == "cls_token") {
        EXPECT_GT(v.abs().max().item<double>(), 0.0);
        EXPECT_LT(v.abs().max().item<double>(), 0.12);
      }
    }
    const int64_t per_block_norms = type == VideoAttentionType::kDividedSpaceTime ? 3 : 2;
    EXPECT_EQ(norms, 2 * (kDepth * per_block_norms + 1));
    EXPECT_EQ(temporal_fc, type == VideoAttentionType::kDividedSpaceTime ? 2 * kDepth : 0);
  }
}

// With temporal_fc = 0 the temporal half of a divided block is the identity, so up to the first
// block's spatial attention each frame's patch tokens see only their own frame and the (input-
// independent) class token: the patch tokens after block 0, and therefore block 1's spatial
// attention input at the patch rows, depend on that frame's pixels alone. Block 0's class-token
// update is the mean over all frames, so block 1's class-token row, and from block 1's spatial
// attention on every patch token, do depend on the other frames. A non-zero temporal_fc mixes the
// frames already in block 0.
TEST(TimeSformer, WithTemporalFcZeroPatchTokensOfAFrameIgnoreOtherFramesUntilTheClassTokenMixesThem) {
  torch::manual_seed(4);
  auto model = tiny_model(VideoAttentionType::kDividedSpaceTime);
  const at::Tensor x = tiny_clips(2);
  at::Tensor y = x.clone();
  y.select(2, 1).normal_();  // another frame 1; frame 0 unchanged
  torch::NoGradGuard no_grad;
  auto differs = [](const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); };

  const auto a = model->frame_attention_inputs(x, 0), b = model->frame_attention_inputs(y, 0);
  ASSERT_EQ(a.size(), static_cast<size_t>(kDepth));
  EXPECT_EQ(differs(a[0], b[0]), 0.0);                                    // block 0: frame 0 alone
  EXPECT_EQ(differs(a[1].narrow(1, 1, kP), b[1].narrow(1, 1, kP)), 0.0);  // block 1's patch rows
  EXPECT_GT(differs(a[1].select(1, 0), b[1].select(1, 0)), 1e-4);         // block 1's class token
  // Block 2's patch rows: through block 1's attention to the class token, small at init (the
  // scores are near-uniform) but not zero, where the rows above are exactly zero.
  EXPECT_GT(differs(a[2].narrow(1, 1, kP), b[2].narrow(1, 1, kP)), 1e-6);
  // Frame 1's own inputs change from block 0 on.
  EXPECT_GT(differs(model->frame_attention_inputs(x, 1)[0], model->frame_attention_inputs(y, 1)[0]), 1e-4);

  for (const auto& p : model->named_parameters())
    if (contains(p.key(), ".temporal_fc.")) p.value().normal_(0.0, 0.1);
  const auto c = model->frame_attention_inputs(x, 0), d = model->frame_attention_inputs(y, 0);
  EXPECT_GT(differs(c[0], d[0]), 1e-4);  // block 0's temporal attention sees frame 1
  EXPECT_GT(differs(c[1].narrow(1, 1, kP), d[1].narrow(1, 1, kP)), 1e-4);
}

TEST(TimeSformer, WrongInputShapeIsAUsageErrorNamingTheExpectedShape) {
  for (VideoAttentionType type : kTypes) {
    SCOPED_TRACE(video_attention_name(type));
    auto model = tiny_model(type);
    const std::string expected = "[B, 2, 4, 8, 8]";
    for (const at::Tensor& x : {torch::randn({1, kChans, kFrames + 1, kImg, kImg}), torch::randn({1, kChans + 1, kFrames, kImg, kImg}),
                                torch::randn({1, kChans, kFrames, kImg, kImg + 2}), torch::randn({1, kChans, kImg, kImg})}) {
      const std::string msg = message_of([&] { model->forward(x); });
      EXPECT_TRUE(contains(msg, expected)) << msg;
      EXPECT_TRUE(contains(msg, c10::str(x.sizes()))) << msg;
    }
  }
}

// The attention config sets the spatial attention (one frame's P + 1 tokens; the whole clip's
// 1 + P * T tokens for joint), the temporal attention config the temporal one (T tokens, no class token).
TEST(TimeSformer, AttentionConfigsReachTheirAttention) {
  {
    auto model = tiny_model(VideoAttentionType::kDividedSpaceTime, kSpatialSparse, "");
    const auto spatial = model->layer_patterns();
    ASSERT_EQ(spatial.size(), static_cast<size_t>(kDepth));
    for (const auto& p : spatial) {
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->num_tokens(), kN);
      EXPECT_EQ(p->num_prefix_tokens(), 1);
      EXPECT_EQ(p->num_heads(), kHeads);
    }
    const auto temporal = model->temporal_layer_patterns();
    ASSERT_EQ(temporal.size(), static_cast<size_t>(kDepth));
    for (const auto& p : temporal) EXPECT_FALSE(p.has_value());  // dense
    EXPECT_EQ(model->kernel_name(), "sparse");
  }
  {
    auto model = tiny_model(VideoAttentionType::kDividedSpaceTime, "", kTemporalSparse);
    for (const auto& p : model->layer_patterns()) EXPECT_FALSE(p.has_value());
    const auto temporal = model->temporal_layer_patterns();
    ASSERT_EQ(temporal.size(), static_cast<size_t>(kDepth));
    for (const auto& p : temporal) {
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->num_tokens(), kFrames);
      EXPECT_EQ(p->num_prefix_tokens(), 0);
      EXPECT_EQ(p->num_heads(), kHeads);
    }
    EXPECT_EQ(model->kernel_name(), "dense");
  }
  {
    auto model = tiny_model(VideoAttentionType::kSpaceOnly, kSpatialSparse);
    for (const auto& p : model->layer_patterns()) {
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->num_tokens(), kN);
    }
    EXPECT_TRUE(model->temporal_layer_patterns().empty());
  }
  {
    auto model = tiny_model(VideoAttentionType::kJointSpaceTime, kSpatialSparse);
    for (const auto& p : model->layer_patterns()) {
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->num_tokens(), 1 + kP * kFrames);
      EXPECT_EQ(p->num_prefix_tokens(), 1);
    }
    EXPECT_TRUE(model->temporal_layer_patterns().empty());
    EXPECT_EQ(model->forward(tiny_clips(1)).sizes(), (at::IntArrayRef{1, kClasses}));
  }
}

TEST(TimeSformer, ATemporalAttentionConfigNeedsDividedSpaceTime) {
  for (VideoAttentionType type : {VideoAttentionType::kSpaceOnly, VideoAttentionType::kJointSpaceTime}) {
    SCOPED_TRACE(video_attention_name(type));
    const std::string msg = message_of([&] { TimeSformer model(tiny_config(type, "", kTemporalSparse)); });
    EXPECT_TRUE(contains(msg, "divided_space_time")) << msg;
    EXPECT_TRUE(contains(msg, video_attention_name(type))) << msg;
    // Another backend without a mask is a temporal attention config too.
    TimeSformerConfig c = tiny_config(type);
    c.temporal_attention.backend = "linformer";
    const std::string backend = message_of([&] { TimeSformer model(c); });
    EXPECT_TRUE(contains(backend, "divided_space_time")) << backend;
  }
}

// Per clip: spatial sequences x heads x 2 d pairs / 1e9 per block, plus (divided) the temporal
// sequences' (P of T tokens). The sparse case sums each block pattern's edges over its heads.
TEST(TimeSformer, AttentionGflopsCountEverySequenceOfTheClip) {
  const int64_t hd = kDim / kHeads;
  auto gflops = [&](double pairs) { return patterns::attention_gflops_for_pairs(pairs, hd); };
  const double dense_spatial = kDepth * kFrames * kHeads * gflops(kN * kN);
  const double dense_temporal = kDepth * kP * kHeads * gflops(kFrames * kFrames);
  // The convention by hand: 2 * head_dim flops per pair.
  EXPECT_DOUBLE_EQ(dense_spatial, kDepth * kFrames * kHeads * 2.0 * hd * kN * kN / 1e9);

  EXPECT_DOUBLE_EQ(tiny_model(VideoAttentionType::kDividedSpaceTime)->attention_gflops_now(), dense_spatial + dense_temporal);
  EXPECT_DOUBLE_EQ(tiny_model(VideoAttentionType::kSpaceOnly)->attention_gflops_now(), dense_spatial);
  const int64_t joint_n = 1 + kP * kFrames;
  EXPECT_DOUBLE_EQ(tiny_model(VideoAttentionType::kJointSpaceTime)->attention_gflops_now(),
                   kDepth * kHeads * gflops(static_cast<double>(joint_n * joint_n)));

  auto sparse = tiny_model(VideoAttentionType::kDividedSpaceTime, kSpatialSparse, "");
  double sparse_spatial = 0;
  for (const auto& p : sparse->layer_patterns()) sparse_spatial += kFrames * patterns::attention_gflops(*p, hd);
  EXPECT_LT(sparse_spatial, dense_spatial);
  EXPECT_NEAR(sparse->attention_gflops_now(), sparse_spatial + dense_temporal, 1e-15);

  auto both = tiny_model(VideoAttentionType::kDividedSpaceTime, kSpatialSparse, kTemporalSparse);
  double sparse_temporal = 0;
  for (const auto& p : both->temporal_layer_patterns()) sparse_temporal += kP * patterns::attention_gflops(*p, hd);
  EXPECT_LT(sparse_temporal, dense_temporal);
  EXPECT_NEAR(both->attention_gflops_now(), sparse_spatial + sparse_temporal, 1e-15);

  auto space_only = tiny_model(VideoAttentionType::kSpaceOnly, kSpatialSparse);
  EXPECT_NEAR(space_only->attention_gflops_now(), sparse_spatial, 1e-15);
}

TEST(TimeSformer, RegistryCreatesTimeSformersOnlyThroughCreateClassifier) {
  auto model = std::dynamic_pointer_cast<TimeSformer>(create_classifier("timesformer_nano_patch4_28", {}));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_frames(), 8);
  EXPECT_EQ(model->video_config().attention_type, VideoAttentionType::kDividedSpaceTime);
  EXPECT_EQ(model->input_shape(), (std::vector<int64_t>{1, 8, 28, 28}));
  EXPECT_EQ(model->config().num_patches(), 49);

  ModelOptions o;
  o.num_frames = 4;
  o.attention_type = "space_only";
  auto four = std::dynamic_pointer_cast<TimeSformer>(create_classifier("timesformer_nano_patch4_28", o));
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(four->num_frames(), 4);
  EXPECT_EQ(four->video_config().attention_type, VideoAttentionType::kSpaceOnly);
  EXPECT_FALSE(four->named_parameters().contains("time_embed"));
  four->eval();
  EXPECT_EQ(four->forward(torch::randn({1, 1, 4, 28, 28})).sizes(), (at::IntArrayRef{1, 10}));

  o.attention_type = "divided_spacetime";
  const std::string typo = message_of([&] { create_classifier("timesformer_nano_patch4_28", o); });
  EXPECT_TRUE(contains(typo, "did you mean 'divided_space_time'")) << typo;
  ModelOptions zero;
  zero.num_frames = 0;
  EXPECT_THROW(create_classifier("timesformer_nano_patch4_28", zero), UsageError);

  const std::string msg = message_of([&] { create_model("timesformer_nano_patch4_28", {}); });
  EXPECT_TRUE(contains(msg, "video model")) << msg;
  // Image models through create_classifier stay image models.
  EXPECT_EQ(std::dynamic_pointer_cast<TimeSformer>(create_classifier("vit_nano_patch2_28", {})), nullptr);
}

TEST(TimeSformer, FrameAttentionInputsGiveOneFramesSpatialInputPerBlock) {
  torch::manual_seed(5);
  for (VideoAttentionType type : {VideoAttentionType::kDividedSpaceTime, VideoAttentionType::kSpaceOnly}) {
    SCOPED_TRACE(video_attention_name(type));
    auto model = tiny_model(type);
    const at::Tensor x = tiny_clips(2);
    torch::NoGradGuard no_grad;
    for (int64_t f : {int64_t{0}, kFrames - 1}) {
      const auto inputs = model->frame_attention_inputs(x, f);
      ASSERT_EQ(inputs.size(), static_cast<size_t>(kDepth));
      for (const auto& t : inputs) EXPECT_EQ(t.sizes(), (at::IntArrayRef{2, kN, kDim}));
      // norm1's output: every token normalised (LayerNorm weight 1, bias 0 at init).
      EXPECT_LT(inputs[0].mean(-1).abs().max().item<double>(), 1e-4);
    }
    // Frames differ, so do their inputs.
    EXPECT_FALSE(torch::allclose(model->frame_attention_inputs(x, 0)[0], model->frame_attention_inputs(x, 1)[0]));
    for (int64_t f : {int64_t{-1}, kFrames}) {
      const std::string msg = message_of([&] { model->frame_attention_inputs(x, f); });
      EXPECT_TRUE(contains(msg, "--frame " + std::to_string(f))) << msg;
      EXPECT_TRUE(contains(msg, std::to_string(kFrames) + " frames")) << msg;
    }
  }
  auto joint = tiny_model(VideoAttentionType::kJointSpaceTime);
  EXPECT_THROW(joint->frame_attention_inputs(tiny_clips(1), 0), UsageError);
}

TEST(VideoAttentionLayout, SequencesAndTokensOfEachType) {
  const AttentionGeometry frame{kN, 1, kHeads, kDim / kHeads, kDepth};
  const auto divided = video_attention_layout(frame, kFrames, VideoAttentionType::kDividedSpaceTime);
  EXPECT_EQ(divided.type, VideoAttentionType::kDividedSpaceTime);
  EXPECT_EQ(divided.num_frames, kFrames);
  EXPECT_EQ(divided.spatial.num_tokens, kN);
  EXPECT_EQ(divided.spatial.num_prefix_tokens, 1);
  EXPECT_EQ(divided.spatial.num_heads, kHeads);
  EXPECT_EQ(divided.spatial.head_dim, kDim / kHeads);
  EXPECT_EQ(divided.spatial.num_layers, kDepth);
  EXPECT_EQ(divided.spatial_sequences, kFrames);
  ASSERT_TRUE(divided.temporal.has_value());
  EXPECT_EQ(divided.temporal->num_tokens, kFrames);
  EXPECT_EQ(divided.temporal->num_prefix_tokens, 0);
  EXPECT_EQ(divided.temporal->num_heads, kHeads);
  EXPECT_EQ(divided.temporal->num_layers, kDepth);
  EXPECT_EQ(divided.temporal_sequences, kP);

  const auto space = video_attention_layout(frame, kFrames, VideoAttentionType::kSpaceOnly);
  EXPECT_EQ(space.spatial.num_tokens, kN);
  EXPECT_EQ(space.spatial_sequences, kFrames);
  EXPECT_FALSE(space.temporal.has_value());
  EXPECT_EQ(space.temporal_sequences, 0);

  const auto joint = video_attention_layout(frame, kFrames, VideoAttentionType::kJointSpaceTime);
  EXPECT_EQ(joint.spatial.num_tokens, 1 + kP * kFrames);
  EXPECT_EQ(joint.spatial.num_prefix_tokens, 1);
  EXPECT_EQ(joint.spatial_sequences, 1);
  EXPECT_FALSE(joint.temporal.has_value());
  EXPECT_EQ(joint.temporal_sequences, 0);

  // One frame: joint is the image model's sequence.
  EXPECT_EQ(video_attention_layout(frame, 1, VideoAttentionType::kJointSpaceTime).spatial.num_tokens, kN);
  EXPECT_THROW(video_attention_layout(frame, 0, VideoAttentionType::kSpaceOnly), UsageError);

  // The model's layout is this one.
  const auto model_layout = tiny_config(VideoAttentionType::kDividedSpaceTime).layout();
  EXPECT_EQ(model_layout.spatial.num_tokens, kN);
  EXPECT_EQ(model_layout.temporal_sequences, kP);
}

TEST(VideoAttentionLayout, NamesParseAndSuggest) {
  EXPECT_EQ(video_attention_names(), (std::vector<std::string>{"divided_space_time", "space_only", "joint_space_time"}));
  for (VideoAttentionType type : kTypes) EXPECT_EQ(parse_video_attention(video_attention_name(type)), type);
  const std::string msg = message_of([] { parse_video_attention("joint_spacetime"); });
  EXPECT_TRUE(contains(msg, "unknown attention type 'joint_spacetime'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'joint_space_time'")) << msg;
  EXPECT_TRUE(contains(msg, "space_only")) << msg;
  EXPECT_THROW(parse_video_attention("Divided_Space_Time_X"), UsageError);
}

}  // namespace
}  // namespace sparsevit::models
