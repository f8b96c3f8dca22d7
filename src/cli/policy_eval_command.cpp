// `sparsevit policy eval`: a trained policy (its EMA weights when it has them) in closed loop in
// PushT, from seeds chosen by the flags; success rate, mean max coverage, optional videos.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "pipelines/policy_checkpoint.h"
#include "pipelines/policy_eval.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"

namespace sparsevit::cli {

void add_policy_eval_command(CLI::App* policy) {
  struct State {
    std::string resume, output, save_video;
    int64_t episodes = 50, seed = 100000, max_steps = 300, threads = 0;
    policy::BlockPoseNoise block_noise;
  };
  auto o = std::make_shared<State>();
  CLI::App* cmd = policy->add_subcommand("eval", "Closed-loop PushT evaluation of a trained policy");
  cmd->add_option(option_names("resume"), o->resume, "a checkpoint of `sparsevit policy train`")->required();
  add_named_option(cmd, "episodes", o->episodes, "episodes (episode i starts from reset(seed + i))")
      ->check(CLI::PositiveNumber);
  add_named_option(cmd, "seed", o->seed, "first episode's seed (Diffusion Policy's test seeds start at 100000)")
      ->check(CLI::NonNegativeNumber);
  add_named_option(cmd, "max_steps", o->max_steps, "control steps per episode at most")->check(CLI::PositiveNumber);
  add_named_option(cmd, "output", o->output, "write the results (per episode) as JSON here");
  add_named_option(cmd, "save_video", o->save_video, "write rollout videos here (.mp4 per episode; a folder ending "
                                                     "in /png: PNG frames)");
  add_named_option(cmd, "block_noise", o->block_noise.position,
                   "low-dim policies: Gaussian error (std, workspace units of 512) on the block position they read, "
                   "each observation anew: how precise a pose the policy needs")
      ->check(CLI::Range(0.0, 512.0));
  add_named_option(cmd, "block_noise_deg", o->block_noise.angle_deg,
                   "low-dim policies: Gaussian error (std, degrees) on the block angle they read")
      ->check(CLI::Range(0.0, 180.0));
  add_named_option(cmd, "threads", o->threads, "CPU threads for LibTorch (0: every core)")->check(CLI::NonNegativeNumber);
  cmd->callback([o] {
    if (o->threads > 0) at::set_num_threads(static_cast<int>(o->threads));
    const train::LoadedCheckpoint ckpt(o->resume);
    pipelines::PolicyDescription description;
    auto model = pipelines::load_checkpoint_policy(ckpt, &description);
    pipelines::PolicyEvalOptions eo;
    eo.episodes = o->episodes;
    eo.first_seed = o->seed;
    eo.max_steps = o->max_steps;
    eo.observation_image_size = description.model.observation_image_size;
    eo.save_video = o->save_video;
    eo.block_noise = o->block_noise;
    const pipelines::PolicyEvalResult r = pipelines::evaluate_policy(*model, eo, std::cout);
    if (eo.block_noise.any())
      std::cout << fmt::format("block-pose noise  : {:.1f} units, {:.1f} deg (std)\n", eo.block_noise.position,
                               eo.block_noise.angle_deg);
    std::cout << fmt::format("score             : {:.3f} (do nothing: {:.3f})\n", r.score, r.floor.score)
              << fmt::format("success rate      : {:.1f}% ({} episodes, seeds {}..{}; do nothing: {:.1f}%)\n",
                             100 * r.success_rate, r.episodes.size(), o->seed, o->seed + o->episodes - 1,
                             100 * r.floor.success_rate)
              << fmt::format("mean max coverage : {:.3f} (do nothing: {:.3f})\n", r.mean_max_coverage,
                             r.floor.mean_max_coverage)
              << fmt::format("time              : {:.1f} s\n", r.seconds);
    if (!o->output.empty()) write_file_atomically(o->output, r.to_json().dump(2) + "\n");
  });
}

}  // namespace sparsevit::cli
