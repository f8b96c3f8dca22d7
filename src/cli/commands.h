// Every `sparsevit` subcommand registers itself on the root app; main() only dispatches.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace sparsevit::train {
struct TrainConfig;
}

namespace sparsevit::cli {

void register_masks_command(CLI::App& app);
void register_flops_command(CLI::App& app);
#ifdef SPARSEVIT_HAVE_TRAIN
void register_finetune_command(CLI::App& app);
void register_calibrate_command(CLI::App& app);
// Finetune's recipe flags (data, model, optimisation, augmentation, EMA, threads): sweep takes them too.
void add_recipe_options(CLI::App* cmd, train::TrainConfig& config);
// Applies `finetune/eval --config FILE` to the options before the command line is parsed.
void apply_train_config_file(CLI::App& app, int argc, char** argv);
#endif
#ifdef SPARSEVIT_HAVE_EXPERIMENTS
void register_sweep_command(CLI::App& app);
void register_diversity_command(CLI::App& app);
void register_attention_map_command(CLI::App& app);
#endif
#ifdef SPARSEVIT_HAVE_BENCH
void register_bench_command(CLI::App& app);
#endif

// "head-dim" -> "--head-dim,--head_dim": options accept both spellings, as MAE's scripts do.
std::string option_names(const std::string& name);

}  // namespace sparsevit::cli
