// `sparsevit finetune` / `sparsevit eval`: MAE main_finetune.py's flags (both --batch_size and
// --batch-size spellings), generated from pipelines::for_each_field, optionally read from
// `--config experiment.yaml` (same key names; flags on the command line override the file).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "pipelines/finetune.h"

namespace sparsevit::cli {

namespace {

void register_train_command(CLI::App& app, const std::string& name, const std::string& help, bool eval_only) {
  struct State {
    pipelines::TrainConfig config;
    std::string config_file;
  };
  auto state = std::make_shared<State>();
  CLI::App* cmd = app.add_subcommand(name, help);
  add_train_config_options(cmd, state->config, /*recipe_only=*/false, pipelines::kFinetune);
  cmd->add_option("--config", state->config_file, "experiment YAML whose keys are these flags' names");
  // MAE's --cls_token: the class-token head (the default here; MAE's default is --global_pool).
  cmd->add_flag_callback("--cls_token", [state] { state->config.global_pool = false; },
                         "classify the class token (the default; MAE's flag to turn --global_pool off)");
  add_mae_compatibility_flags(cmd);
  cmd->callback([state, eval_only] {
    pipelines::TrainConfig c = state->config;
    if (eval_only) c.eval = true;
    const pipelines::TrainSummary summary = pipelines::run_finetune(c);
    if (summary.rank != 0) return;  // data-parallel runs: rank 0 reports
    std::cout << summary.to_text() << "\n" << summary.to_json().dump() << std::endl;
  });
}

}  // namespace

void register_finetune_command(CLI::App& app) {
  register_train_command(app, "finetune", "Train a ViT with the configured attention (DeiT recipe)", false);
  register_train_command(app, "eval", "Evaluate a checkpoint (--resume) on the test split", true);
}

}  // namespace sparsevit::cli
