// `sparsevit policy pose-fit`: how precisely can this encoder locate the block when trained to?
// The policy's encoder and readout, from scratch (or a checkpoint's), regress the block pose of
// single frames; scored on held-out episodes beside the blind mean pose
// (pipelines/policy_pose_fit.h, docs/policy.md "What bounds success").
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "pipelines/policy_pose_fit.h"
#include "pipelines/policy_train.h"

namespace sparsevit::cli {

void add_policy_pose_fit_command(CLI::App* policy) {
  struct State {
    pipelines::TrainConfig config = pipelines::policy_defaults();
    policy::BlockPoseFitOptions fit;
    std::string resume, output;
  };
  auto o = std::make_shared<State>();
  pipelines::TrainConfig& c = o->config;
  CLI::App* cmd = policy->add_subcommand("pose-fit", "Train an image policy's encoder to regress the block pose: how "
                                                     "precisely can it locate the block at all");
  add_named_option(cmd, "data_path", c.data_path, "demonstrations (.episodes file or Diffusion Policy's .zarr folder)")
      ->required();
  add_named_option(cmd, "model", c.model, "encoder (a registered ViT)");
  add_named_option(cmd, "attn_cfg", c.attn_cfg, "attention config YAML of the encoder (default: built-in Fibottention)");
  add_named_option(cmd, "attn_set", c.attn_set, "override a mask kwarg: NAME=VALUE (repeatable)");
  add_named_option(cmd, "input_size", c.input_size, "image size the encoder takes (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "patch_size", c.patch_size, "patch size (0: the model's)")->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "obs_readout", c.obs_readout, "spatial_softmax | attention_pool | flatten | cls")
      ->check(CLI::IsMember(policy::observation_readout_names()));
  add_named_option(cmd, "num_kp", c.num_kp, "spatial_softmax: keypoints")->check(CLI::PositiveNumber);
  add_named_option(cmd, "resume", o->resume, "start from this policy checkpoint's (EMA) encoder instead of a fresh one");
  add_named_option(cmd, "max_train_samples", c.max_train_samples,
                   "train on the first N episodes and hold out the rest (0: hold out the last 10%)")
      ->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "steps", o->fit.steps, "optimiser steps")->check(CLI::PositiveNumber);
  add_named_option(cmd, "batch_size", o->fit.batch_size, "frames per step")->check(CLI::PositiveNumber);
  add_named_option(cmd, "lr", o->fit.lr, "AdamW peak learning rate (warm-up, cosine)")->check(CLI::PositiveNumber);
  add_named_option(cmd, "eval_frames", o->fit.max_test_frames, "frames scored on each side at most")
      ->check(CLI::PositiveNumber);
  add_named_option(cmd, "seed", c.seed, "initialisation and frame draws");
  add_named_option(cmd, "threads", c.threads, "CPU threads for LibTorch (0: every core)")->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "output", o->output, "write the result as JSON here");
  cmd->callback([o] {
    o->fit.seed = static_cast<uint64_t>(o->config.seed);
    pipelines::run_policy_pose_fit(o->config, o->fit, o->resume, o->output);
  });
}

}  // namespace sparsevit::cli
