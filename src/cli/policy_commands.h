// The subcommands of `sparsevit policy` (robot imitation learning, docs/policy.md): each file
// adds its own to the group that policy_command.cpp creates.
#pragma once

#include <CLI/CLI.hpp>

namespace sparsevit::cli {

// `policy collect`: expert demonstrations to a .episodes file (policy_collect_command.cpp).
void add_policy_collect_command(CLI::App* policy);

#ifdef SPARSEVIT_HAVE_POLICY_TRAIN
// `policy train` / `policy eval`: declared here by their own files' author.
#endif

}  // namespace sparsevit::cli
