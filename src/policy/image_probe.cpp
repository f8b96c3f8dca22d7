#include "policy/image_probe.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "policy/episode_batches.h"
#include "policy/eval_mode_scope.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

// Every window's partner: the next window of the (shuffled) batch, so each sees another
// window's observation (another episode's, mostly).
at::Tensor permuted(const at::Tensor& x) { return at::roll(x, {1}, {0}); }

}  // namespace

int64_t probe_first_episode(int64_t episodes, int64_t first_episode) {
  const int64_t first = first_episode >= 0 ? first_episode : episodes - std::max<int64_t>(1, episodes / 10);
  if (first < 0 || first >= episodes)
    throw UsageError("the image probe's first episode " + std::to_string(first) + " leaves no episode of " +
                     std::to_string(episodes));
  return first;
}

nlohmann::json ImageProbeResult::to_json() const {
  return {{"readout", readout},
          {"first_episode", first_episode},
          {"episodes", episodes},
          {"windows", windows},
          {"held_out", held_out},
          {"loss_true", loss_true},
          {"loss_images_permuted", loss_images_permuted},
          {"loss_agent_pos_permuted", loss_agent_pos_permuted},
          {"image_gap", image_gap()},
          {"agent_pos_gap", agent_pos_gap()},
          {"feature_spread", feature_spread}};
}

std::string ImageProbeResult::to_table() const {
  std::string s = fmt::format("image probe ({} readout): {} windows of episodes {}..{} ({}), same noise and timesteps\n",
                              readout, windows, first_episode, first_episode + episodes - 1,
                              held_out ? "held out" : "seen in training");
  s += fmt::format("  loss, true observations     {:.4f}\n", loss_true);
  s += fmt::format("  loss, images permuted       {:.4f}  ({:+.4f})\n", loss_images_permuted, image_gap());
  s += fmt::format("  loss, agent pos permuted    {:.4f}  ({:+.4f})\n", loss_agent_pos_permuted, agent_pos_gap());
  s += fmt::format("  feature spread across frames {:.4f}", feature_spread);
  return s;
}

ImageProbeResult probe_images(DiffusionPolicy& policy, std::shared_ptr<const episodes::EpisodeSet> demos,
                               const ImageProbeOptions& options, bool held_out) {
  const int64_t n_episodes = demos->episodes();
  ImageProbeResult r;
  r.readout = observation_readout_name(policy.config().readout.kind);
  r.first_episode = probe_first_episode(n_episodes, options.first_episode);
  r.episodes = n_episodes - r.first_episode;
  r.held_out = held_out;
  std::vector<bool> mask(static_cast<std::size_t>(n_episodes), false);
  for (int64_t e = r.first_episode; e < n_episodes; ++e) mask[static_cast<std::size_t>(e)] = true;

  const DiffusionPolicyConfig& pc = policy.config();
  EpisodeBatchOptions bo;
  bo.obs_horizon = pc.obs_horizon;
  bo.pred_horizon = pc.pred_horizon;
  bo.action_horizon = pc.action_horizon;
  bo.image_size = policy.image_size();
  bo.batch_size = options.batch_size;
  bo.drop_last = false;
  bo.seed = options.seed;  // shuffled: a batch mixes episodes, so permuting swaps other scenes in
  if (!policy.has_encoder()) throw UsageError("the image probe needs an image policy; this one is low-dim");
  EpisodeBatchSource windows(std::move(demos), bo, mask);

  EvalModeScope eval_mode(policy);
  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  double sums[3] = {0, 0, 0};
  std::vector<at::Tensor> features;
  data::Batch batch;
  for (int64_t i = 0; (options.batches <= 0 || i < options.batches) && windows.next(batch); ++i) {
    const at::Tensor& images = batch.images;
    const at::Tensor& agent_pos = batch.extras.at("agent_pos");
    const at::Tensor& actions = batch.extras.at("action");
    const int64_t b = images.size(0);
    const at::Tensor eps = at::randn({b, pc.pred_horizon, pc.action_dim}, gen, at::kFloat);
    const at::Tensor t = at::randint(0, pc.noise.num_train_timesteps, {b}, gen, at::TensorOptions(at::kLong));
    sums[0] += policy.denoising_error(images, agent_pos, actions, eps, t).sum().item<double>();
    sums[1] += policy.denoising_error(permuted(images), agent_pos, actions, eps, t).sum().item<double>();
    sums[2] += policy.denoising_error(images, permuted(agent_pos), actions, eps, t).sum().item<double>();
    features.push_back(policy.observation_features(images).reshape({b * pc.obs_horizon, -1}));
    r.windows += b;
  }
  if (r.windows == 0) throw UsageError("the image probe found no window in episodes " + std::to_string(r.first_episode) + "..");
  r.loss_true = sums[0] / static_cast<double>(r.windows);
  r.loss_images_permuted = sums[1] / static_cast<double>(r.windows);
  r.loss_agent_pos_permuted = sums[2] / static_cast<double>(r.windows);
  const at::Tensor f = at::cat(features).to(at::kDouble);
  const double mean_norm = f.norm(2, {1}).mean().item<double>();
  r.feature_spread = mean_norm > 0 ? f.std(0, /*unbiased=*/false).norm().item<double>() / mean_norm : 0.0;
  return r;
}

}  // namespace sparsevit::policy
