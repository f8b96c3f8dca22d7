// The sweep's plan (`sparsevit sweep`, before any training): its configs parsed and checked, the
// baseline first, budgets matched (the derived configs written), finished runs checked against what
// they would now run, and one plan line per config.
#pragma once

#include <string>
#include <vector>

#include "config/attention_spec.h"
#include "experiments/sweep.h"

namespace sparsevit::experiments {

// One config of the sweep, as it runs.
struct SweepItem {
  std::string path, stem;
  config::AttentionSpec spec;
  std::string source_path, knob;  // the config given; path is the derived one when matched
  std::string same_pattern_as;    // an earlier item's stem when both compute exactly the same pairs
};

struct SweepPlan {
  std::vector<SweepItem> items;  // the baseline first, then the order given
  std::string baseline;          // its stem: --baseline, else the dense config ("" when none)
};

// Backend vit (or dense) without a mask: the default baseline.
bool is_dense_attention(const config::AttentionSpec& spec);

// The plan of `config`; fills result.skipped, target_pruning_ratio, geometry and plan.
SweepPlan plan_sweep(const SweepConfig& config, SweepResult& result);

}  // namespace sparsevit::experiments
