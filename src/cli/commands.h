// Every `sparsevit` subcommand registers itself on the root app; main() only dispatches.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace sparsevit::cli {

void register_masks_command(CLI::App& app);
void register_flops_command(CLI::App& app);
#ifdef SPARSEVIT_HAVE_OPS
void register_bench_command(CLI::App& app);
#endif

// "head-dim" -> "--head-dim,--head_dim": options accept both spellings, as MAE's scripts do.
std::string option_names(const std::string& name);

}  // namespace sparsevit::cli
