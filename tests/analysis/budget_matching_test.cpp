// Budget matching: every mechanism of the zoo set to Fibottention's pruning ratio at the
// geometries the evidence uses (N = 50 and N = 197), checked against the attention report
// (`sparsevit masks` / `flops`) and against every other value of the knob.
#include "analysis/budget_matching.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "analysis/attention_report.h"
#include "util/errors.h"

namespace sparsevit::analysis {
namespace {

const std::string kConfigs = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/";
const AttentionGeometry kN50{50, 1, 4, 16, 6};    // vit_nano_patch4_28
const AttentionGeometry kN197{197, 1, 4, 16, 6};  // vit_nano_patch2_28

config::AttentionSpec load(const std::string& name) { return config::load_attention_spec(kConfigs + name); }

TEST(BudgetMatching, TheReferenceBudgets) {
  // Fibottention (Wythoff, w 3..16 = N/3) keeps 8% of the pairs at N = 50.
  EXPECT_NEAR(budget_pruning_ratio(load("vit_fibottention_small.yaml"), kN50), 0.92003, 1e-5);
  EXPECT_EQ(budget_pruning_ratio(load("vit_dense.yaml"), kN50), 0.0);
}

TEST(BudgetMatching, EveryMechanismLandsOnTheClosestBudgetItsKnobAllows) {
  struct Case {
    const char* config;
    const char* knob;
    double tolerance;  // |achieved - target| at N = 50: a knob step is coarse at small N
  };
  const Case cases[] = {{"n50/vit_fibottention_modified_n50.yaml", "w_max", 0.01}, {"vit_fibonacci.yaml", "w_max", 0.01},
                        {"vit_random.yaml", "keys_per_query", 0.01}, {"vit_structured_local.yaml", "window", 0.01},
                        {"vit_sparse_transformer.yaml", "stride", 0.01}, {"vit_bigbird.yaml", "random_per_query", 0.01},
                        {"n50/vit_longformer_n50.yaml", "window", 0.03}, {"vit_topk.yaml", "k", 0.01},
                        {"vit_topk_scheduled.yaml", "k_end", 0.01}, {"vit_linformer.yaml", "k", 0.01},
                        {"vit_efficient.yaml", "key_dim", 0.01}, {"vit_performer.yaml", "num_features", 0.01},
                        {"vit_imhsa.yaml", "landmarks", 0.04}, {"vit_reformer.yaml", "chunk", 0.01}};
  const double target = 0.92;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.config);
    const config::AttentionSpec spec = load(c.config);
    EXPECT_EQ(budget_knob(spec), c.knob);
    const MatchedBudget m = match_budget(spec, kN50, target);
    EXPECT_EQ(m.knob, c.knob);
    EXPECT_NE(m.value.find(std::string(c.knob) + "="), std::string::npos) << m.value;
    // The achieved budget is the report's for the derived spec...
    EXPECT_DOUBLE_EQ(m.pruning_ratio, attention_report(m.spec, kN50).pruning_ratio);
    EXPECT_NEAR(m.pruning_ratio, target, c.tolerance);
    // ...and no other single value of the knob comes closer.
    const auto& kwargs = m.spec.has_mask() ? m.spec.mask_kwargs : m.spec.backend_kwargs;
    const int64_t chosen = kwargs.get_int(c.knob, 0);
    for (int64_t delta : {-1, 1}) {
      config::AttentionSpec other = m.spec;
      auto& k = other.has_mask() ? other.mask_kwargs : other.backend_kwargs;
      int64_t v = chosen + delta;
      if (std::string(c.knob) == "landmarks") {  // squares only
        const auto s = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(chosen))));
        v = (s + delta) * (s + delta);
      }
      if (v < 1) continue;
      k.set_scalar(c.knob, std::to_string(v));
      try {
        EXPECT_GE(std::abs(attention_report(other, kN50).pruning_ratio - target) + 1e-12,
                  std::abs(m.pruning_ratio - target)) << c.knob << "=" << v;
      } catch (const UsageError&) {  // outside the mechanism's range
      }
    }
  }
}

TEST(BudgetMatching, AtN197TheShippedFibottentionBudgetIsReached) {
  const double target = budget_pruning_ratio(load("vit_fibottention.yaml"), kN197);
  EXPECT_GT(target, 0.9);
  for (const char* c : {"vit_random.yaml", "vit_bigbird.yaml", "vit_structured_local.yaml", "vit_linformer.yaml"}) {
    const MatchedBudget m = match_budget(load(c), kN197, target);
    EXPECT_NEAR(m.pruning_ratio, target, 0.006) << c << " " << m.value;
  }
}

TEST(BudgetMatching, KwargsThatWouldOverrideTheKnobAreDropped) {
  // random's pruning_ratio (0.98 in the shipped file) would win over keys_per_query.
  const MatchedBudget r = match_budget(load("vit_random.yaml"), kN50, 0.9);
  EXPECT_FALSE(r.spec.mask_kwargs.has("pruning_ratio"));
  EXPECT_TRUE(r.spec.mask_kwargs.has("keys_per_query"));
  // Longformer's per-layer list becomes one window for every layer.
  const MatchedBudget l = match_budget(load("n50/vit_longformer_n50.yaml"), kN50, 0.9);
  EXPECT_FALSE(l.spec.mask_kwargs.is_list("window"));
  // Fibonacci's w_min 5 cannot reach 8% of the pairs: it is lowered with w_max.
  const MatchedBudget f = match_budget(load("vit_fibonacci.yaml"), kN50, 0.92);
  EXPECT_LE(f.spec.mask_kwargs.get_int("w_min", 0), f.spec.mask_kwargs.get_int("w_max", 0));
  EXPECT_LT(f.spec.mask_kwargs.get_int("w_max", 0), 5);
  // Static pruning takes the target itself.
  config::AttentionSpec pruning = load("vit_pruning.yaml");
  const MatchedBudget p = match_budget(pruning, kN50, 0.9);
  EXPECT_EQ(p.value, "pruning_ratio=0.9");
  EXPECT_DOUBLE_EQ(p.spec.mask_kwargs.get_double("pruning_ratio", 0, 0, 1), 0.9);
}

TEST(BudgetMatching, MechanismsWithoutAKnobAndBadTargets) {
  const MatchedBudget d = match_budget(load("vit_dense.yaml"), kN50, 0.92);
  EXPECT_TRUE(d.knob.empty());
  EXPECT_EQ(d.pruning_ratio, 0.0);
  EXPECT_THROW(match_budget(load("vit_random.yaml"), kN50, 1.5), UsageError);
  EXPECT_THROW(match_budget(load("vit_random.yaml"), kN50, std::nan("")), UsageError);
}

}  // namespace
}  // namespace sparsevit::analysis
