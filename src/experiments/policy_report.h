// The policy experiment's report (scripts/policy-experiment, issue #32): per group of runs (one
// attention or observation, several training seeds), the closed-loop metrics as the field
// reports them (Diffusion Policy's score, success rate, mean max coverage) on held-out and
// training seeds, the do-nothing floor, the image probe's gap and the best validation loss, each
// as mean and 95% Student-t interval over the training seeds, and the paired difference of each
// group to a baseline group on the seeds both have (analysis/seed_statistics.h, the sweep's
// statistics).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::experiments {

struct PolicyReportGroup {
  std::string name;               // e.g. "dense"
  std::vector<std::string> runs;  // `policy train --output_dir` folders, each with summary.json and config.json
};

struct PolicyReportOptions {
  std::vector<PolicyReportGroup> groups;
  std::string baseline;    // a group name ("" : no paired differences)
  std::string expert_log;  // `policy collect --all` output on the evaluation seeds ("" : none)
};

// UsageError naming the file for a run without a readable summary.json / config.json, an
// unknown baseline or an empty group.
nlohmann::json policy_report(const PolicyReportOptions& options);
std::string policy_report_markdown(const nlohmann::json& report);

}  // namespace sparsevit::experiments
