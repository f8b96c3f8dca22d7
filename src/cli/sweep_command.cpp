// `sparsevit sweep --configs configs/attention/*.yaml --seeds 0,1,2 ...`: every config trained
// with one recipe (finetune's flags), resumable, then report.md / report.json / PNG plots.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "experiments/sweep.h"

namespace sparsevit::cli {

void register_sweep_command(CLI::App& app) {
  struct State {
    experiments::SweepConfig config;
    std::string seeds = "0";
    std::string config_file;
  };
  auto s = std::make_shared<State>();
  s->config.recipe.num_workers = 1;  // per run; the cores go to the compute
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Train every attention config with one recipe and seeds; write report.md, report.json and plots");
  pipelines::TrainConfig& r = s->config.recipe;
  cmd->add_option("--configs", s->config.configs, "attention config YAMLs (one report row each)")->required();
  add_named_option(cmd, "seeds", s->seeds, "comma-separated seeds; a seed fixes the data order for every config");
  add_named_option(cmd, "output_dir", s->config.output_dir, "runs go to <output_dir>/<config stem>/seed<k>; reports here");
  add_named_option(cmd, "diversity_limit", s->config.diversity_limit,
      "eval images for the head-diversity statistic (0: all, -1: skip; capped by max_eval_samples)");
  add_named_option(cmd, "match_to", s->config.match_to,
      "reference attention config: set every other config's budget knob to its pruning ratio at --model");
  add_named_option(cmd, "match_pruning_ratio", s->config.match_pruning_ratio,
      "set every config's budget knob to this pruning ratio at --model (instead of --match_to)")
      ->check(CLI::Range(0.0, 1.0));
  add_named_option(cmd, "baseline", s->config.baseline,
      "config name (file stem) the paired differences are taken to (default: the dense config)");
  add_named_option(cmd, "report_name", s->config.report_name,
      "report files: <output_dir>/<name>.md, .json, <name>_*.png (several reports can share runs)");
  cmd->add_flag(option_names("plan"), s->config.plan_only,
      "list each config's budget and finished runs (writing the matched configs), then stop");
  add_train_config_options(cmd, r, /*recipe_only=*/true);  // the shared recipe: finetune's flags of the same names
  cmd->add_option("--config", s->config_file, "experiment YAML whose keys are these flags' names");
  cmd->callback([s, cmd] {
    experiments::SweepConfig c = s->config;
    c.seeds = experiments::parse_seed_list(s->seeds);
    // The options given, for report.md.
    std::string line = "sparsevit sweep";
    for (const CLI::Option* o : cmd->get_options()) {
      if (o->count() == 0 || o->get_lnames().empty() || o->get_lnames().front() == "config") continue;
      line += " --" + o->get_lnames().front();
      for (const std::string& v : o->results()) line += o->get_expected_min() == 0 ? "" : " " + v;
    }
    c.command_line = line;
    const experiments::SweepResult result = experiments::run_sweep(c);
    if (c.plan_only) {
      for (const auto& line : result.plan) std::cout << line << "\n";
      return;
    }
    std::cout << "sweep: " << result.rows.size() << " configs, " << result.runs_trained << " runs trained, "
              << result.runs_reused << " reused, " << result.skipped.size() << " skipped\n";
    for (const auto& f : result.files) std::cout << "wrote " << f << "\n";
    std::cout << experiments::sweep_report_json(c, result).dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
