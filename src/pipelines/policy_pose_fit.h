// `sparsevit policy pose-fit`: policy/block_pose_fit.h's ceiling on how precisely an image
// policy's encoder can locate the block, for the encoder the policy flags build (or a
// checkpoint's, to ask whether a trained encoder can be pushed further), on demonstrations.
// docs/policy.md, "What bounds success".
#pragma once

#include <string>

#include "pipelines/train_config.h"
#include "policy/block_pose_fit.h"

namespace sparsevit::pipelines {

// The encoder of `config`'s policy fields (model, attention, shape overrides, readout; seeded by
// config.seed), or of `resume`'s policy when set, fitted on config.data_path. With
// options.first_episode -1 and config.max_train_samples > 0, the episodes after the first
// max_train_samples are held out (as `policy train` holds them out). Progress goes to stderr,
// the table to stdout, JSON to `output` when set.
policy::BlockPoseFitResult run_policy_pose_fit(const TrainConfig& config, policy::BlockPoseFitOptions options,
                                               const std::string& resume, const std::string& output);

}  // namespace sparsevit::pipelines
