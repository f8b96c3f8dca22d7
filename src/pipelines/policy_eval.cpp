#include "pipelines/policy_eval.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>

#include "envs/pusht_env.h"
#include "envs/pusht_rollout.h"
#include "policy/policy_actor.h"
#include "policy/rollout_video.h"

namespace sparsevit::pipelines {

nlohmann::json PolicyEvalResult::to_json() const {
  nlohmann::json eps = nlohmann::json::array();
  for (const auto& e : episodes)
    eps.push_back({{"seed", e.seed}, {"success", e.success}, {"max_coverage", e.max_coverage},
                   {"final_coverage", e.final_coverage}, {"steps", e.steps}});
  return {{"episodes", static_cast<int64_t>(episodes.size())},
          {"success_rate", success_rate},
          {"mean_max_coverage", mean_max_coverage},
          {"seconds", seconds},
          {"per_episode", eps}};
}

PolicyEvalResult evaluate_policy(policy::DiffusionPolicy& policy, const PolicyEvalOptions& o, std::ostream& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  policy.eval();
  envs::PushTConfig env_config;
  env_config.render_size = static_cast<int>(o.observation_image_size);
  env_config.max_steps = static_cast<int>(o.max_steps);
  envs::PushTEnv env(env_config);
  envs::RolloutOptions rollout;
  rollout.image_size = static_cast<int>(o.observation_image_size);
  rollout.obs_horizon = static_cast<int>(policy.config().obs_horizon);
  rollout.max_steps = static_cast<int>(o.max_steps);
  // Videos: "DIR" -> DIR/episode_<seed>.mp4; "DIR/png" -> PNG frames per episode (256 px frames).
  std::optional<policy::RolloutVideoRecorder> recorder;
  std::string video_dir = o.save_video;
  policy::RolloutVideoFormat format = policy::RolloutVideoFormat::kMp4;
  if (!video_dir.empty()) {
    recorder.emplace(env, 256);
    const std::string suffix = "/png";
    if (video_dir.size() > suffix.size() && video_dir.compare(video_dir.size() - suffix.size(), suffix.size(), suffix) == 0) {
      video_dir.resize(video_dir.size() - suffix.size());
      format = policy::RolloutVideoFormat::kPngFrames;
    }
  }
  PolicyEvalResult result;
  int64_t solved = 0;
  double coverage_sum = 0;
  for (int64_t i = 0; i < o.episodes; ++i) {
    const uint64_t seed = static_cast<uint64_t>(o.first_seed + i);
    policy::DiffusionPolicyActor actor(policy, seed);
    const envs::RolloutResult r =
        envs::run_pusht_rollout(env, actor, seed, rollout, recorder ? recorder->callback() : envs::RolloutStepCallback{});
    if (recorder) recorder->write(video_dir, seed, format);
    result.episodes.push_back({static_cast<int64_t>(seed), r.success, r.max_coverage, r.final_coverage, r.steps});
    solved += r.success;
    coverage_sum += r.max_coverage;
    if ((i + 1) % 10 == 0 || i + 1 == o.episodes) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress << fmt::format("eval {}/{} episodes: success {:.1f}%  mean max coverage {:.3f}  ({:.0f} s)", i + 1,
                              o.episodes, 100.0 * solved / (i + 1), coverage_sum / (i + 1), s)
               << std::endl;
    }
  }
  if (o.episodes > 0) {
    result.success_rate = static_cast<double>(solved) / o.episodes;
    result.mean_max_coverage = coverage_sum / o.episodes;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace sparsevit::pipelines
