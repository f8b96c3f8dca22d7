// A diffusion policy small enough for unit tests: 16x16 images, patch 8 (N = 5), a one-block
// encoder and a 2-level U-Net. Suites set what they test on top (readout, Crossway, steps).
#pragma once

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

}  // namespace sparsevit::policy::testing
