// Matched budgets (issue 16): every mechanism with a free budget parameter is set to the
// pruning ratio of a reference at one model's geometry. The budget is the attention report's
// pruning ratio (analysis/attention_report.h): patch pairs a pattern skips, or for backends
// without a pattern their equivalent pairs (multiply-adds / (2 * head_dim)). Standard library only.
#pragma once

#include <string>

#include "config/attention_spec.h"
#include "util/attention_geometry.h"

namespace sparsevit::analysis {

// The pruning ratio `sparsevit masks` / `flops` report for the spec at this geometry.
double budget_pruning_ratio(const config::AttentionSpec& spec, const AttentionGeometry& geometry);

// The kwarg that sets a mechanism's budget ("" when it has none: dense, file masks):
//   fibo w_max · local, longformer window · random keys_per_query · bigbird random_per_query ·
//   sparse_transformer stride · topk k (k_end when scheduled) · pruning pruning_ratio ·
//   linformer k · performer num_features · imhsa landmarks · reformer chunk · efficient key_dim.
std::string budget_knob(const config::AttentionSpec& spec);

struct MatchedBudget {
  config::AttentionSpec spec;  // the input with its knob set (unchanged when it has none)
  std::string knob;            // the knob's kwarg, "" when none
  std::string value;           // what was set: "keys_per_query=4", "stride=14 local=1"
  double pruning_ratio = 0;    // achieved at the geometry
  double target = 0;
};

// Sets the knob to the value whose pruning ratio is closest to `target` (ties: the sparser).
// Fibottention lowers w_min with w_max below it; Sparse Transformer searches its local width
// (<= the stride) too, since local = stride cannot reach a small budget.
// Kwargs that would override the knob (random's pruning_ratio or density, local's per-head or
// per-layer windows, longformer's per-layer list) are removed. UsageError when the target is
// outside [0, 1].
MatchedBudget match_budget(const config::AttentionSpec& spec, const AttentionGeometry& geometry, double target);

}  // namespace sparsevit::analysis
