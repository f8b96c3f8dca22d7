#include "analysis/attention_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/attention_spec.h"

namespace sparsevit::analysis {
namespace {

config::AttentionSpec spec_of(const std::string& yaml) { return config::parse_attention_spec(yaml, "test.yaml"); }

TEST(AttentionReport, DenseVitBase) {
  const AttentionReport r = attention_report(spec_of("attention: {backend: vit}"), AttentionGeometry{});
  EXPECT_NEAR(r.attention_gflops, 0.715, 0.001);
  EXPECT_NEAR(r.attention_gflops_patch, 12 * 12 * 2 * 64 * 196.0 * 196 / 1e9, 1e-9);
  EXPECT_DOUBLE_EQ(r.pruning_ratio, 0.0);
  EXPECT_DOUBLE_EQ(r.density, 1.0);
  ASSERT_EQ(r.layers.size(), 12u);
  EXPECT_EQ(r.layers[0].heads[0].edges, 197 * 197);
}

TEST(AttentionReport, FibottentionMatchesThePaper) {
  const AttentionReport r = attention_report(config::default_attention_spec(), AttentionGeometry{});
  EXPECT_NEAR(r.pruning_ratio, 0.9801, 5e-5);
  // The literature's ~0.014 GFLOPs counts patch pairs: dense patch GFLOPs x (1 - pruning).
  EXPECT_NEAR(r.attention_gflops_patch, 12 * 12 * 2 * 64 * 196.0 * 196 / 1e9 * (1 - r.pruning_ratio), 1e-9);
  EXPECT_NEAR(r.attention_gflops_patch, 0.014, 0.0005);
  EXPECT_GT(r.attention_gflops, r.attention_gflops_patch);
  // Heads share only the class-token row and column (2N - 1 of their ~1100-4000 edges).
  EXPECT_LT(r.layers[0].mean_head_overlap, 0.25);
}

TEST(AttentionReport, JsonHasTheDocumentedSchema) {
  const AttentionGeometry shape{50, 1, 4, 16, 2};
  const nlohmann::json j = report_to_json(attention_report(config::default_attention_spec(), shape));
  for (const char* key : {"tokens", "heads", "layers", "pruning_ratio", "density", "attention_gflops", "layers_detail"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["tokens"], 50);
  ASSERT_EQ(j["layers_detail"].size(), 2u);
  const auto& head = j["layers_detail"][0]["heads"][0];
  EXPECT_TRUE(head["edges"].is_number_integer());
  EXPECT_TRUE(head["offsets"].is_array());
  EXPECT_TRUE(head["window"].is_number_integer());
  const nlohmann::json dense = report_to_json(attention_report(spec_of("attention: {backend: vit}"), shape));
  EXPECT_TRUE(dense["layers_detail"][0]["heads"][0]["offsets"].is_null());
}

TEST(AttentionReport, TopkIsNominal) {
  const AttentionReport r = attention_report(spec_of("attention: {mask: topk, mask_kwargs: {k: 4}}"), AttentionGeometry{});
  EXPECT_TRUE(r.dynamic);
  EXPECT_EQ(r.keys_per_query, 4);
  EXPECT_NEAR(r.pruning_ratio, 1 - 4.0 / 196, 1e-12);
  EXPECT_NEAR(r.density, 4.0 / 197, 1e-12);
}

TEST(AttentionReport, TableShowsTotals) {
  const std::string table = format_report_table(attention_report(config::default_attention_spec(), AttentionGeometry{}));
  EXPECT_NE(table.find("pruning ratio 0.9801"), std::string::npos) << table;
  EXPECT_NE(table.find("layer 11"), std::string::npos);
}

}  // namespace
}  // namespace sparsevit::analysis
