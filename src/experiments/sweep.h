// The matched-budget comparison (`sparsevit sweep`): every attention config trained with one
// recipe and, per seed, one data order; resumable run by run; then report.md (the literature's
// table: top-1 mean, sample std and 95% t interval over seeds, the paired difference to the
// dense baseline, attention GFLOPs, pruning ratio, train images/s, head diversity), report.json
// and PNG plots (accuracy vs attention GFLOPs, test top-1 per epoch with interval bands).
// With --match_to / --match_pruning_ratio every config's budget knob is first set to one
// pruning ratio at the model's geometry (analysis/budget_matching.h); the derived configs are
// written to <output_dir>/configs/ and the runs use them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/seed_statistics.h"
#include "pipelines/finetune.h"
#include "util/attention_geometry.h"

namespace sparsevit::experiments {

struct SweepConfig {
  std::vector<std::string> configs;   // attention YAMLs, one row each
  std::vector<int64_t> seeds = {0};
  std::string output_dir = "runs/sweep";  // runs go to <output_dir>/<config stem>/seed<k>
  // The shared recipe; attn_cfg, seed, output_dir and resume are set per run.
  pipelines::TrainConfig recipe;
  int64_t diversity_limit = 10000;    // eval images for head diversity (also capped by max_eval_samples); -1: skip
  std::string command_line;           // recorded in report.md
  // Budget matching: the reference config whose pruning ratio every other config is matched
  // to, or an explicit ratio (>= 0). At most one; neither: the configs run as written.
  std::string match_to;
  double match_pruning_ratio = -1;
  double confidence = 0.95;           // of the intervals in the report
  std::string baseline;               // config stem the paired differences are taken to ("": the dense config)
  std::string report_name = "report"; // <output_dir>/<report_name>.md/.json and <report_name>_*.png
  bool plan_only = false;             // match budgets, write the derived configs, list the plan; train nothing
};

struct SweepRow {
  std::string name;                   // the config's file stem
  std::string config;                 // its path
  std::string mechanism;              // backend / mask, e.g. "vit / fibo"
  bool dense = false;                 // backend vit without a mask
  bool baseline = false;              // the row paired differences are taken to (listed first)
  std::vector<int64_t> seeds;
  std::vector<double> acc1;           // per seed, final test top-1 (%)
  analysis::SeedSummary acc1_stats;   // mean, sample std, t interval over seeds
  std::optional<analysis::SeedSummary> paired;  // acc1 - baseline's per seed; when the baseline ran the same seeds
  std::string budget_knob;            // "keys_per_query=3" when matching set it, else ""
  std::string source_config;          // the config given (config is the derived one when matched)
  std::string same_pattern_as;        // an earlier row computing exactly the same pairs ("" when none)
  double attention_gflops = 0, attention_gflops_patch = 0, pruning_ratio = 0, density = 1;
  double attention_gflops_paid = 0;   // mean per sample over training (differs for scheduled budgets)
  int64_t params = 0;
  double images_per_second = 0;       // train images/s, mean over epochs and seeds
  double seconds = 0;                 // training + evaluation time summed over seeds (wall, per run)
  bool has_diversity = false;         // false when the backend has no per-head outputs
  double diversity_median = 0, diversity_iqr = 0;  // means over seeds of each run's median / IQR
  std::vector<std::vector<double>> seed_curves;  // test top-1 per epoch, per seed
  std::vector<double> curve;          // test top-1 per epoch, mean over seeds
  std::vector<double> curve_low, curve_high;  // its t interval per epoch (seeds that reached it)
};

struct SweepResult {
  double target_pruning_ratio = -1;   // the matched budget, -1 when configs ran as written
  AttentionGeometry geometry;         // where budgets were matched
  std::vector<SweepRow> rows;         // dense baseline first, then in the configs' order
  std::vector<std::string> skipped;   // "config: reason"
  int64_t runs_trained = 0;           // runs (re)started by this call
  int64_t runs_reused = 0;            // finished runs found (summary.json) and not redone
  // The training and evaluation images of every run (0 when no run recorded them).
  int64_t train_samples = 0, eval_samples = 0;
  std::vector<std::string> files;     // report.md, report.json, PNGs
  // Per config: "stem: config, budget knob, pruning ratio at the model, runs finished / to train".
  std::vector<std::string> plan;
};

SweepResult run_sweep(const SweepConfig& config);

// "0,1,2" -> {0, 1, 2}; UsageError on bad text.
std::vector<int64_t> parse_seed_list(const std::string& text);

// The report's parts (exposed for tests).
nlohmann::json sweep_report_json(const SweepConfig& config, const SweepResult& result);
std::string sweep_report_markdown(const SweepConfig& config, const SweepResult& result);

}  // namespace sparsevit::experiments
