// How a policy checkpoint describes its model: the DiffusionPolicyConfig of the run (encoder
// name and shape, attention config text, horizons, U-Net, Crossway) and the demonstrations'
// image size, as a JSON object under "policy" in the checkpoint's metadata, so `policy eval`
// and `policy train --resume` rebuild the same network.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "policy/diffusion_policy.h"
#include "train/train_config.h"

namespace sparsevit::train {

class LoadedCheckpoint;

struct PolicyDescription {
  policy::DiffusionPolicyConfig config;
  std::string attention_yaml;  // the encoder's attention config (its text travels with the weights)
  std::vector<std::string> attention_overrides;
  int64_t observation_image_size = 96;  // the demonstrations' frames: rollouts render at this size
};

// The description the flags ask for (the attention config read from --attn_cfg / --attn_set).
PolicyDescription policy_description(const TrainConfig& config, int64_t observation_image_size);
nlohmann::json policy_description_json(const PolicyDescription& description);
// nullopt when the checkpoint holds no policy; RuntimeError naming it when the description is corrupt.
std::optional<PolicyDescription> checkpoint_policy(const LoadedCheckpoint& checkpoint);
// The checkpoint's policy with its weights (the EMA's when the checkpoint has one, as Diffusion
// Policy evaluates). RuntimeError when it holds no policy.
std::shared_ptr<policy::DiffusionPolicy> load_checkpoint_policy(const LoadedCheckpoint& checkpoint,
                                                                PolicyDescription* description = nullptr);

}  // namespace sparsevit::train
