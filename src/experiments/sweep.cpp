#include "experiments/sweep.h"

#include <algorithm>
#include <sstream>

#include "experiments/sweep_plan.h"
#include "experiments/sweep_report.h"
#include "experiments/sweep_runs.h"
#include "util/errors.h"

namespace sparsevit::experiments {

std::vector<int64_t> parse_seed_list(const std::string& text) {
  std::vector<int64_t> seeds;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      if (std::find(seeds.begin(), seeds.end(), v) == seeds.end()) seeds.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--seeds: '" + item + "' is not a non-negative integer (expected e.g. 0,1,2)");
    }
  }
  if (seeds.empty()) throw UsageError("--seeds: no seeds given (expected e.g. 0,1,2)");
  return seeds;
}

SweepResult run_sweep(const SweepConfig& c) {
  if (c.configs.empty()) throw UsageError("sweep needs --configs FILE...");
  if (c.seeds.empty()) throw UsageError("sweep needs --seeds");
  if (c.output_dir.empty()) throw UsageError("sweep needs --output_dir");
  pipelines::resolve(c.recipe);  // the recipe's usage errors before any run
  SweepResult result;
  const SweepPlan plan = plan_sweep(c, result);
  if (c.plan_only) return result;
  run_sweep_plan(c, plan, result);
  write_sweep_report(c, result);
  return result;
}

}  // namespace sparsevit::experiments
