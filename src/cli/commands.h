// Every `sparsevit` subcommand registers itself on the root app; main() only dispatches.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace sparsevit::pipelines {
struct TrainConfig;
}

namespace sparsevit::cli {

void register_masks_command(CLI::App& app);
void register_flops_command(CLI::App& app);
#ifdef SPARSEVIT_HAVE_TRAIN
void register_finetune_command(CLI::App& app);
// One option per pipelines::TrainConfig field of `command` (pipelines::kFinetune / kPretrain bits;
// pipelines::for_each_field); recipe_only: the fields every run of an experiment shares (sweep takes those).
void add_train_config_options(CLI::App* cmd, pipelines::TrainConfig& config, bool recipe_only, unsigned command = 1);
// The TrainConfig fields named in `names` only (commands that share some of the training flags).
void add_train_config_fields(CLI::App* cmd, pipelines::TrainConfig& config, const std::vector<std::string>& names);
// A member of a command's own config that is TrainConfig field `name` (dataset, threads, ...).
struct TrainConfigFieldTarget {
  std::string name;
  std::variant<std::string*, int64_t*, double*, bool*, std::vector<std::string>*> member;
};
// The options of those fields as finetune declares them (help text, choices, both spellings),
// bound to the command's own members, whose values are the defaults --help shows. In the
// order given; std::logic_error for a name that is no field or a member of another type.
void bind_train_config_fields(CLI::App* cmd, const std::vector<TrainConfigFieldTarget>& targets);
void register_pretrain_command(CLI::App& app);
// Flags MAE's scripts pass that change nothing here (--pin_mem, --no_pin_mem, --local_rank,
// --world_size, --dist_on_itp): accepted so those command lines run unchanged.
void add_mae_compatibility_flags(CLI::App* cmd);
#endif
#ifdef SPARSEVIT_HAVE_INFERENCE
void register_predict_command(CLI::App& app);
void register_export_command(CLI::App& app);
#endif
#ifdef SPARSEVIT_HAVE_EXPERIMENTS
void register_sweep_command(CLI::App& app);
void register_calibrate_command(CLI::App& app);
void register_diversity_command(CLI::App& app);
void register_attention_map_command(CLI::App& app);
#endif
#ifdef SPARSEVIT_HAVE_BENCH
void register_bench_command(CLI::App& app);
#endif
#ifdef SPARSEVIT_HAVE_POLICY
// `sparsevit policy ...`; its subcommands are declared in cli/policy_commands.h.
void register_policy_command(CLI::App& app);
#endif

// `sparsevit help-markdown` (hidden from --help): every command's options as Markdown, from the
// App tree registered on `app`, walked when the command runs (docs/cli.md).
void register_cli_reference_command(CLI::App& app);

// Applies `SUBCOMMAND --config FILE` (for subcommands that have --config) to that subcommand's
// options before the command line is parsed.
void apply_config_file_option(CLI::App& app, int argc, char** argv);

// "head-dim" -> "--head-dim,--head_dim": options accept both spellings, as MAE's scripts do.
std::string option_names(const std::string& name);

// Makes --help show `value` as the option's default. CLI11 renders a list as "[a,b]" unless an
// operator<< for std::vector is in scope (LibTorch declares one), which renders it otherwise; so a
// list's default is written here, the same in every translation unit (unity builds mix them).
template <class T>
CLI::Option* show_default(CLI::Option* option, const T& value) {
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    std::string text = "[";
    for (size_t i = 0; i < value.size(); ++i) text += (i ? "," : "") + value[i];
    return option->default_str(text + "]");
  } else {
    return option->capture_default_str();
  }
}

// An option in both spellings whose --help shows its default.
template <class T>
CLI::Option* add_named_option(CLI::App* cmd, const std::string& name, T& field, const std::string& help) {
  return show_default(cmd->add_option(option_names(name), field, help), field);
}

}  // namespace sparsevit::cli
