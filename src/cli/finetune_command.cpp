// `sparsevit finetune` / `sparsevit eval`: MAE main_finetune.py's flags (both --batch_size and
// --batch-size spellings), generated from train::for_each_field, optionally read from
// `--config experiment.yaml` (same key names; flags on the command line override the file).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "cli/commands.h"
#include "train/finetune.h"

namespace sparsevit::cli {

void add_train_config_options(CLI::App* cmd, train::TrainConfig& config, bool recipe_only) {
  train::for_each_field(config, [&](auto& value, const train::FieldInfo& f) {
    if (recipe_only && f.group != train::FieldGroup::recipe) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) {
      cmd->add_flag(option_names(f.name), value, f.help);
    } else {
      CLI::Option* o = cmd->add_option(option_names(f.name), value, f.help)->capture_default_str();
      if (!f.choices.empty()) o->check(CLI::IsMember(f.choices));
    }
  });
}

namespace {

void register_train_command(CLI::App& app, const std::string& name, const std::string& help, bool eval_only) {
  struct State {
    train::TrainConfig config;
    std::string config_file;
  };
  auto state = std::make_shared<State>();
  CLI::App* cmd = app.add_subcommand(name, help);
  add_train_config_options(cmd, state->config, /*recipe_only=*/false);
  cmd->add_option("--config", state->config_file, "experiment YAML whose keys are these flags' names");
  cmd->callback([state, eval_only] {
    train::TrainConfig c = state->config;
    if (eval_only) c.eval = true;
    const train::TrainSummary summary = train::run_finetune(c);
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
