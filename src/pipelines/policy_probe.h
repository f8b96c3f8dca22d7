// `sparsevit policy probe` (and the probe after `policy train`): policy/image_probe.h's probe
// on a checkpoint's policy and the demonstrations, with the episodes the run did not train on,
// and policy/block_pose_probe.h's (how precisely the features locate the block).
// docs/policy.md, "The image probe".
#pragma once

#include <string>

#include "policy/block_pose_probe.h"
#include "policy/image_probe.h"

namespace sparsevit::pipelines {

// The checkpoint's (EMA) policy on the demonstrations at `data_path`. With first_episode -1,
// the episodes after those the run trained on when its --max_train_samples left some out, else
// the last 10% (marked as seen in training when the run used these demonstrations). The
// block-pose probe (skipped when block_pose.max_fit_frames is 0) fits its readout on the episodes
// before those. Prints the tables to stdout and writes JSON to `output` when set (the image
// probe's keys, and "block_pose").
policy::ImageProbeResult run_policy_probe(const std::string& checkpoint, const std::string& data_path,
                                          policy::ImageProbeOptions options, policy::BlockPoseProbeOptions block_pose,
                                          const std::string& output);

}  // namespace sparsevit::pipelines
