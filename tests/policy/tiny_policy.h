// A diffusion policy small enough for unit tests: 16x16 images, patch 8 (N = 5), a one-block
// encoder and a 2-level U-Net. Suites set what they test on top (readout, Crossway, steps).
// Also the scripted expert's demonstrations at that image size.
#pragma once

#include <cstdint>

#include "envs/pusht_demonstrations.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::policy::testing {

inline DiffusionPolicyConfig tiny_policy_config() {
  DiffusionPolicyConfig c;
  c.encoder_model = "vit_nano_patch8_48";
  c.encoder.img_size = 16;
  c.encoder.depth = 1;
  c.encoder.embed_dim = 16;
  c.encoder.num_heads = 2;
  c.pred_horizon = 8;
  c.action_horizon = 4;
  c.step_embed_dim = 8;
  c.down_dims = {16, 32};
  c.n_groups = 4;
  return c;
}

// The same with the spatial-softmax readout (what reads the block's position).
inline DiffusionPolicyConfig tiny_spatial_softmax_config() {
  DiffusionPolicyConfig c = tiny_policy_config();
  c.readout.kind = ObservationReadout::kSpatialSoftmax;
  return c;
}

// A config as a low-dimensional policy: agent position + block pose, no encoder.
inline DiffusionPolicyConfig as_lowdim(DiffusionPolicyConfig c) {
  c.observation = PolicyObservation::kLowdim;
  c.encoder_model.clear();
  return c;
}

// Demonstrations of the scripted expert at 16 px, as `policy collect` writes them.
inline episodes::EpisodeSet tiny_expert_demonstrations(int episodes, uint64_t first_seed = 0) {
  envs::DemonstrationOptions o;
  o.episodes = episodes;
  o.first_seed = first_seed;
  o.image_size = 16;
  o.threads = 1;
  return envs::collect_pusht_demonstrations(o);
}

}  // namespace sparsevit::policy::testing
