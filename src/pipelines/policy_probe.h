// `sparsevit policy probe` (and the probe after `policy train`): policy/image_probe.h's probe
// on a checkpoint's policy and the demonstrations, with the episodes the run did not train on.
// docs/policy.md, "The image probe".
#pragma once

#include <string>

#include "policy/image_probe.h"

namespace sparsevit::pipelines {

// The checkpoint's (EMA) policy on the demonstrations at `data_path`. With first_episode -1,
// the episodes after those the run trained on when its --max_train_samples left some out, else
// the last 10% (marked as seen in training when the run used these demonstrations). Prints the
// table to stdout and writes JSON to `output` when set.
policy::ImageProbeResult run_policy_probe(const std::string& checkpoint, const std::string& data_path,
                                          policy::ImageProbeOptions options, const std::string& output);

}  // namespace sparsevit::pipelines
