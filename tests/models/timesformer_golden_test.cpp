// Golden tests of the TimeSformer forward: the logits of a tiny model (8x8 frames, patch 4,
// 4 frames, dim 16, depth 2, 2 heads) with fixed weights and clips against an independent
// float64 reference of facebookresearch/TimeSformer's VisionTransformer
// (tests/golden/timesformer_reference.py, fixture written by tests/golden/make_timesformer_golden.py).
// The three attention types, dense; divided space-time with a local spatial pattern (sparse
// operator and masked kernel), with a local temporal pattern, with both; space-only with the
// spatial pattern. The masks on the Python side are built there, not by sparsevit's generators.
// The weights are copied in by TimeSformer's parameter names: the fixture's names and the
// model's parameters must be the same set.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "config/attention_spec.h"
#include "golden/golden_fixture.h"
#include "golden/timesformer_golden.inc"
#include "models/timesformer.h"
#include "models/video_attention_layout.h"

namespace sparsevit::golden {
namespace {

models::TimeSformerConfig golden_config(const TimeSformerGoldenCase& c) {
  models::TimeSformerConfig config;
  config.vit = tiny_vit_config(kTinyTimeSformer, c.spatial_attention_yaml);
  config.num_frames = kTinyTimeSformerFrames;
  config.attention_type = models::parse_video_attention(c.attention_type);
  if (std::string(c.temporal_attention_yaml).empty()) {
    config.temporal_attention = config::AttentionSpec{};
  } else {
    config.temporal_attention = config::parse_attention_spec(c.temporal_attention_yaml, "golden_temporal.yaml");
  }
  return config;
}

std::shared_ptr<models::TimeSformer> golden_model(const TimeSformerGoldenCase& c, at::ScalarType dtype) {
  auto model = std::make_shared<models::TimeSformer>(golden_config(c));
  cast_parameters(*model, dtype);
  load_parameters_by_name(*model, *c.weights);  // throws unless the name sets are equal
  model->eval();
  return model;
}

at::Tensor logits_of(models::TimeSformer& model, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  return model.forward(tensor_from(kTimeSformerClipValues, kTimeSformerClipShape, dtype)).to(at::kDouble);
}

at::Tensor expected_logits(const TimeSformerGoldenCase& c) {
  return tensor_from(c.logits, {kTimeSformerClipShape[0], kTinyTimeSformer.num_classes});
}

// The largest |actual - expected| / (atol + rtol |expected|): <= 1 passes.
bool is_divided(const TimeSformerGoldenCase& c) { return std::string(c.attention_type) == "divided_space_time"; }

TEST(TimeSformerGolden, FixtureDescribesTheModelsUnderTest) {
  ASSERT_EQ(kTimeSformerCases.size(), 8u);
  const int64_t P = (kTinyTimeSformer.img_size / kTinyTimeSformer.patch_size) *
                    (kTinyTimeSformer.img_size / kTinyTimeSformer.patch_size);
  for (const auto& c : kTimeSformerCases) {
    SCOPED_TRACE(c.name);
    auto model = golden_model(c, at::kFloat);
    EXPECT_EQ(models::video_attention_name(model->video_config().attention_type), c.attention_type);
    // A case with a spatial mask runs a pattern over one frame's P + 1 tokens in every block.
    const bool spatial_mask = std::string(c.spatial_attention_yaml).find("mask:") != std::string::npos;
    const auto spatial = model->layer_patterns();
    ASSERT_EQ(static_cast<int64_t>(spatial.size()), kTinyTimeSformer.depth);
    for (const auto& p : spatial) {
      ASSERT_EQ(p.has_value(), spatial_mask);
      if (p) {
        EXPECT_EQ(p->num_tokens(), P + 1);
        EXPECT_EQ(p->num_prefix_tokens(), 1);
        EXPECT_EQ(p->num_heads(), kTinyTimeSformer.num_heads);
      }
    }
    // A temporal mask: a pattern over the T frames of one patch position, no prefix token.
    if (!is_divided(c)) continue;
    const bool temporal_mask = std::string(c.temporal_attention_yaml).find("mask:") != std::string::npos;
    const auto temporal = model->temporal_layer_patterns();
    ASSERT_EQ(static_cast<int64_t>(temporal.size()), kTinyTimeSformer.depth);
    for (const auto& p : temporal) {
      ASSERT_EQ(p.has_value(), temporal_mask);
      if (p) {
        EXPECT_EQ(p->num_tokens(), kTinyTimeSformerFrames);
        EXPECT_EQ(p->num_prefix_tokens(), 0);
        EXPECT_EQ(p->num_heads(), kTinyTimeSformer.num_heads);
      }
    }
  }
}

// float64 parameters and clips: only the order of floating-point operations differs from the
// reference, so the logits agree to ~1e-14; 1e-10 leaves room without hiding a modelling change.
TEST(TimeSformerGolden, Float64LogitsMatchTheReference) {
  for (const auto& c : kTimeSformerCases) {
    auto model = golden_model(c, at::kDouble);
    const at::Tensor logits = logits_of(*model, at::kDouble);
    const at::Tensor expected = expected_logits(c);
    ASSERT_EQ(logits.sizes(), expected.sizes()) << c.name;
    EXPECT_LE(worst_error_ratio(logits, expected, 1e-10, 1e-10), 1.0)
        << c.name << ": max |diff| " << (logits - expected).abs().max().item<double>() << "\nlogits\n"
        << logits << "\nexpected\n" << expected;
  }
}

// float32, as models train and run: the same tolerance as the ViT golden test (1e-5 absolute +
// 1e-5 relative), well below the effect of any modelling change (the smallest between the
// fixture's cases is above 1e-3; zeroing temporal_fc moves the logits by more than 1).
TEST(TimeSformerGolden, Float32LogitsMatchTheReference) {
  for (const auto& c : kTimeSformerCases) {
    auto model = golden_model(c, at::kFloat);
    const at::Tensor logits = logits_of(*model, at::kFloat);
    const at::Tensor expected = expected_logits(c);
    ASSERT_EQ(logits.sizes(), expected.sizes()) << c.name;
    EXPECT_LE(worst_error_ratio(logits, expected, 1e-5, 1e-5), 1.0)
        << c.name << ": max |diff| " << (logits - expected).abs().max().item<double>() << "\nlogits\n"
        << logits << "\nexpected\n" << expected;
  }
}

// The temporal path is part of what the fixture checks: with every block's temporal_fc zeroed
// the logits leave the reference's far behind (the generator measured > 1.5 for each divided case).
TEST(TimeSformerGolden, TemporalPathShowsInTheLogits) {
  int divided = 0;
  for (const auto& c : kTimeSformerCases) {
    if (!is_divided(c)) continue;
    ++divided;
    auto model = golden_model(c, at::kFloat);
    {
      at::NoGradGuard no_grad;
      auto params = model->named_parameters(/*recurse=*/true);
      int zeroed = 0;
      for (int64_t i = 0; i < kTinyTimeSformer.depth; ++i)
        for (const char* leaf : {".temporal_fc.weight", ".temporal_fc.bias"}) {
          at::Tensor* p = params.find("blocks." + std::to_string(i) + leaf);
          ASSERT_NE(p, nullptr) << c.name << ": blocks." << i << leaf;
          p->zero_();
          ++zeroed;
        }
      ASSERT_EQ(zeroed, 2 * kTinyTimeSformer.depth);
    }
    const double moved = (logits_of(*model, at::kFloat) - expected_logits(c)).abs().max().item<double>();
    EXPECT_GT(moved, 1e-2) << c.name;
  }
  EXPECT_EQ(divided, 5);
}

}  // namespace
}  // namespace sparsevit::golden
