// The sweep's runs: each (config, seed) of the plan trained by pipelines::run_finetune unless its
// summary.json says it finished (resumed from its checkpoint when it did not), and one report row
// per config gathered from those summaries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "experiments/sweep.h"
#include "experiments/sweep_plan.h"

namespace sparsevit::experiments {

// The recipe as it decides results, as summary.json and the report record it: finetune's fields of
// the recipe group (those the sweep takes; the run group is set per run or left at its default),
// less the ones that only change speed or progress output (threads, num_workers, print_freq).
nlohmann::json sweep_recipe_json(const pipelines::TrainConfig& recipe);

// Where the run of one config and seed lives: <output_dir>/<config stem>/seed<k>.
std::filesystem::path sweep_run_dir(const SweepConfig& c, const std::string& stem, int64_t seed);

// Refuses before anything is written when a finished run of `stem` ran another attention config
// (an edited config file, or another matched budget).
void check_finished_runs(const SweepConfig& c, const std::string& stem, const std::string& attention_yaml);

// Trains or reuses every run of `plan`; appends a row per config to result.rows and counts the runs.
void run_sweep_plan(const SweepConfig& config, const SweepPlan& plan, SweepResult& result);

}  // namespace sparsevit::experiments
