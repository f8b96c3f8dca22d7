// `sparsevit policy train`: the diffusion policy on demonstrations (Diffusion Policy's train.py
// flags where they exist, generated from pipelines::for_each_field with the policy's defaults),
// optionally read from `--config`, then closed-loop evaluation.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "pipelines/policy_train.h"

namespace sparsevit::cli {

void add_policy_train_command(CLI::App* policy) {
  struct State {
    pipelines::TrainConfig config = pipelines::policy_defaults();
    std::string config_file;
  };
  auto state = std::make_shared<State>();
  CLI::App* cmd = policy->add_subcommand("train", "Train a diffusion policy with a ViT encoder on demonstrations, then "
                                                  "evaluate it in closed loop");
  add_train_config_options(cmd, state->config, /*recipe_only=*/false, pipelines::kPolicy);
  cmd->add_option("--config", state->config_file, "experiment YAML whose keys are these flags' names");
  cmd->callback([state] {
    const pipelines::PolicyTrainSummary summary = pipelines::run_policy_train(state->config);
    if (summary.rank != 0) return;
    std::cout << summary.to_text() << "\n" << summary.to_json().dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
