// How a policy checkpoint describes its model: the DiffusionPolicyConfig of the run (encoder
// name and shape, attention config text, horizons, U-Net, Crossway, the observation readout and
// its training shift) and the demonstrations' image size, as a JSON object under "policy" in the
// checkpoint's metadata, so `policy eval`, `policy probe` and `policy train --resume` rebuild the
// same network.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/model_description.h"
#include "pipelines/train_config.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::train {
class LoadedCheckpoint;
}

namespace sparsevit::pipelines {

struct PolicyDescription {
  policy::DiffusionPolicyConfig config;   // the network to build
  models::PolicyModelDescription model;  // what its checkpoints say (models/model_description.h)
};

// The description the flags ask for (the attention config read from --attn_cfg / --attn_set).
PolicyDescription policy_description(const TrainConfig& config, int64_t observation_image_size);
// nullopt when the checkpoint holds no policy; RuntimeError naming it when the description is corrupt.
std::optional<PolicyDescription> checkpoint_policy(const train::LoadedCheckpoint& checkpoint);
// The checkpoint's policy with its weights (the EMA's when the checkpoint has one, as Diffusion
// Policy evaluates). RuntimeError when it holds no policy.
std::shared_ptr<policy::DiffusionPolicy> load_checkpoint_policy(const train::LoadedCheckpoint& checkpoint,
                                                                PolicyDescription* description = nullptr);

// `policy export`: the checkpoint's evaluated weights (the EMA's when it has one) as a checkpoint
// of the model alone (no optimizer, EMA or generator state; the same metadata, epoch and step),
// about a quarter of a training checkpoint's size, which `policy eval` and `policy probe` load as
// they load the original and which evaluates identically. Written atomically; returns the bytes.
int64_t export_policy_weights(const std::string& checkpoint, const std::string& output);

}  // namespace sparsevit::pipelines
