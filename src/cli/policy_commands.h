// The subcommands of `sparsevit policy` (robot imitation learning, docs/policy.md): each file
// adds its own to the group that policy_command.cpp creates.
#pragma once

#include <CLI/CLI.hpp>

namespace sparsevit::cli {

// `policy collect`: expert demonstrations to a .episodes file (policy_collect_command.cpp).
void add_policy_collect_command(CLI::App* policy);
// `policy dataset-info`: what the policy reads from demonstrations (policy_dataset_info_command.cpp).
void add_policy_dataset_info_command(CLI::App* policy);

#ifdef SPARSEVIT_HAVE_POLICY_TRAIN
// `policy train`: the diffusion policy on demonstrations (policy_train_command.cpp).
void add_policy_train_command(CLI::App* policy);
// `policy eval`: a checkpoint in closed loop (policy_eval_command.cpp).
void add_policy_eval_command(CLI::App* policy);
// `policy probe`: does a checkpoint's policy use its image (policy_probe_command.cpp).
void add_policy_probe_command(CLI::App* policy);
// `policy pose-fit`: how precisely an encoder can locate the block (policy_pose_fit_command.cpp).
void add_policy_pose_fit_command(CLI::App* policy);
// `policy export`: a checkpoint's evaluated weights alone (policy_export_command.cpp).
void add_policy_export_command(CLI::App* policy);
// `policy report`: the experiment's table over training seeds (policy_report_command.cpp).
void add_policy_report_command(CLI::App* policy);
#endif

}  // namespace sparsevit::cli
