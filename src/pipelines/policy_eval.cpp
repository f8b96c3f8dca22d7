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
                   {"final_coverage", e.final_coverage}, {"score", e.score}, {"steps", e.steps}});
  nlohmann::json j = {{"episodes", static_cast<int64_t>(episodes.size())},
                      {"score", score},
                      {"success_rate", success_rate},
                      {"mean_max_coverage", mean_max_coverage},
                      {"seconds", seconds},
                      {"per_episode", eps}};
  if (has_floor) j["do_nothing"] = floor.to_json();
  if (block_noise.any()) j["block_noise"] = {{"position", block_noise.position}, {"angle_deg", block_noise.angle_deg}};
  return j;
}

nlohmann::json PushTScores::to_json() const {
  return {{"score", score}, {"success_rate", success_rate}, {"mean_max_coverage", mean_max_coverage}};
}

std::string eval_line(const PolicyEvalResult& r) {
  std::string s = fmt::format("score {:.3f}, success {:.1f}% of {} episodes, mean max coverage {:.3f}", r.score,
                              100 * r.success_rate, r.episodes.size(), r.mean_max_coverage);
  if (r.has_floor)
    s += fmt::format(" (do nothing: score {:.3f}, success {:.1f}%, mean max coverage {:.3f})", r.floor.score,
                     100 * r.floor.success_rate, r.floor.mean_max_coverage);
  return s;
}

namespace {

// The do-nothing actor's scores on the episodes' seeds (no rendering worth the name: 1 px frames).
PushTScores do_nothing_scores(const PolicyEvalOptions& o) {
  envs::PushTConfig env_config;
  env_config.max_steps = static_cast<int>(o.max_steps);
  envs::PushTEnv env(env_config);
  envs::RolloutOptions rollout;
  rollout.image_size = 1;
  rollout.obs_horizon = 1;
  rollout.max_steps = static_cast<int>(o.max_steps);
  envs::PushTDoNothingActor actor;
  PushTScores s;
  for (int64_t i = 0; i < o.episodes; ++i) {
    const envs::RolloutResult r = envs::run_pusht_rollout(env, actor, static_cast<uint64_t>(o.first_seed + i), rollout);
    s.score += r.max_reward;
    s.success_rate += r.success ? 1.0 : 0.0;
    s.mean_max_coverage += r.max_coverage;
  }
  if (o.episodes > 0) {
    s.score /= o.episodes;
    s.success_rate /= o.episodes;
    s.mean_max_coverage /= o.episodes;
  }
  return s;
}

}  // namespace

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
  result.block_noise = o.block_noise;
  int64_t solved = 0;
  double coverage_sum = 0, score_sum = 0;
  for (int64_t i = 0; i < o.episodes; ++i) {
    const uint64_t seed = static_cast<uint64_t>(o.first_seed + i);
    policy::DiffusionPolicyActor actor(policy, seed, o.block_noise);
    const envs::RolloutResult r =
        envs::run_pusht_rollout(env, actor, seed, rollout, recorder ? recorder->callback() : envs::RolloutStepCallback{});
    if (recorder) recorder->write(video_dir, seed, format);
    result.episodes.push_back(
        {static_cast<int64_t>(seed), r.success, r.max_coverage, r.final_coverage, r.max_reward, r.steps});
    score_sum += r.max_reward;
    solved += r.success;
    coverage_sum += r.max_coverage;
    if ((i + 1) % 10 == 0 || i + 1 == o.episodes) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress << fmt::format("eval {}/{} episodes: score {:.3f}  success {:.1f}%  mean max coverage {:.3f}  ({:.0f} s)",
                              i + 1, o.episodes, score_sum / (i + 1), 100.0 * solved / (i + 1),
                              coverage_sum / (i + 1), s)
               << std::endl;
    }
  }
  if (o.episodes > 0) {
    result.success_rate = static_cast<double>(solved) / o.episodes;
    result.mean_max_coverage = coverage_sum / o.episodes;
    result.score = score_sum / o.episodes;
  }
  if (o.floor) {
    result.floor = do_nothing_scores(o);
    result.has_floor = true;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace sparsevit::pipelines
