// `sparsevit policy probe`: does a trained policy use its image? The diffusion loss on held-out
// windows with true observations, with images of other windows and with agent positions of
// other windows (same noise and timesteps), the readout feature's spread across frames, and how
// precisely the features locate the block (pipelines/policy_probe.h, docs/policy.md).
#include <ATen/Parallel.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "pipelines/policy_probe.h"

namespace sparsevit::cli {

void add_policy_probe_command(CLI::App* policy) {
  struct State {
    std::string resume, data_path, output;
    policy::ImageProbeOptions probe;
    policy::BlockPoseProbeOptions block_pose;
    int64_t threads = 0;
  };
  auto o = std::make_shared<State>();
  CLI::App* cmd = policy->add_subcommand("probe", "Image probe of a trained policy: loss with true vs permuted images "
                                                  "vs permuted agent positions on held-out windows");
  cmd->add_option(option_names("resume"), o->resume, "a checkpoint of `sparsevit policy train`")->required();
  cmd->add_option(option_names("data_path"), o->data_path,
                  "demonstrations (.episodes file or Diffusion Policy's .zarr folder)")
      ->required();
  add_named_option(cmd, "first_episode", o->probe.first_episode,
                   "probe episodes from this one on (-1: those the run's --max_train_samples left out, else the "
                   "last 10%)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  add_named_option(cmd, "batches", o->probe.batches, "batches of windows at most (0: every window)")
      ->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "batch_size", o->probe.batch_size, "windows per batch")->check(CLI::PositiveNumber);
  add_named_option(cmd, "seed", o->probe.seed, "window order, noise and timesteps");
  add_named_option(cmd, "block_pose_frames", o->block_pose.max_fit_frames,
                   "block-pose probe: frames of the earlier episodes its ridge readout is fitted on, at most "
                   "(0: skip it)")
      ->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "block_pose_features", o->block_pose.features,
                   "block-pose probe: what the ridge reads: readout (the U-Net's input feature) | tokens (the "
                   "encoder's patch tokens, flattened: what any readout could take)")
      ->check(CLI::IsMember({"readout", "tokens"}));
  add_named_option(cmd, "output", o->output, "write the results as JSON here");
  add_named_option(cmd, "threads", o->threads, "CPU threads for LibTorch (0: every core)")->check(CLI::NonNegativeNumber);
  cmd->callback([o] {
    if (o->threads > 0) at::set_num_threads(static_cast<int>(o->threads));
    pipelines::run_policy_probe(o->resume, o->data_path, o->probe, o->block_pose, o->output);
  });
}

}  // namespace sparsevit::cli
