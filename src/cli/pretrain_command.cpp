// `sparsevit pretrain`: MAE main_pretrain.py's flags (both spellings), generated from
// pipelines::for_each_field with the pretrain defaults, optionally read from `--config`.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "pipelines/pretrain.h"

namespace sparsevit::cli {

void register_pretrain_command(CLI::App& app) {
  struct State {
    pipelines::TrainConfig config = pipelines::pretrain_defaults();
    std::string config_file;
  };
  auto state = std::make_shared<State>();
  CLI::App* cmd = app.add_subcommand("pretrain", "MAE self-supervised pretraining with the configured attention");
  add_train_config_options(cmd, state->config, /*recipe_only=*/false, pipelines::kPretrain);
  cmd->add_option("--config", state->config_file, "experiment YAML whose keys are these flags' names");
  add_mae_compatibility_flags(cmd);
  cmd->callback([state] {
    const pipelines::PretrainSummary summary = pipelines::run_pretrain(state->config);
    if (summary.rank != 0) return;
    std::cout << summary.to_text() << "\n" << summary.to_json().dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
