#include "policy/block_pose_probe.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "policy/eval_mode_scope.h"
#include "policy/image_probe.h"
#include "policy/lowdim_observation.h"
#include "policy/observation_images.h"
#include "util/errors.h"

namespace sparsevit::policy {
std::vector<int64_t> spaced_steps(int64_t begin, int64_t end, int64_t limit) {
  std::vector<int64_t> steps;
  const int64_t n = end - begin;
  if (n <= 0 || limit <= 0) return steps;
  const int64_t take = std::min(n, limit);
  for (int64_t i = 0; i < take; ++i) steps.push_back(begin + i * n / take);
  return steps;
}

at::Tensor block_poses(const episodes::EpisodeSet& demos, const std::vector<int64_t>& steps) {
  const int64_t n = static_cast<int64_t>(steps.size());
  at::Tensor poses = at::empty({n, kBlockPoseDim}, at::kFloat);
  float* p = poses.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    block_pose_features(demos.state.data() + steps[static_cast<std::size_t>(i)] * demos.state_dim, p + i * kBlockPoseDim);
  return poses.to(at::kDouble);
}

at::Tensor frame_features(DiffusionPolicy& policy, const episodes::EpisodeSet& demos, const std::vector<int64_t>& steps,
                          const std::string& features) {
  if (features != "readout" && features != "tokens")
    throw UsageError("block-pose probe features must be readout or tokens, got '" + features + "'");
  const int64_t to = policy.config().obs_horizon, s = policy.image_size(), bytes = demos.image_bytes();
  const int64_t n = static_cast<int64_t>(steps.size());
  if (n == 0) throw UsageError("frame_features: no frame");
  const int64_t padded = (n + to - 1) / to * to;
  std::vector<uint8_t> frames;
  frames.reserve(static_cast<std::size_t>(padded * bytes));
  for (int64_t j = 0; j < padded; ++j) {
    const uint8_t* frame = demos.images.data() + steps[static_cast<std::size_t>(std::min(j, n - 1))] * bytes;
    frames.insert(frames.end(), frame, frame + bytes);
  }
  const at::Tensor images =
      observation_images(frames.data(), padded, demos.image_height, demos.image_width, s).view({padded / to, to, 3, s, s});
  const at::Tensor f = features == "tokens" ? policy.patch_token_features(images) : policy.observation_features(images);
  return f.reshape({padded, -1}).narrow(0, 0, n);
}

at::Tensor frame_features_in_batches(DiffusionPolicy& policy, const episodes::EpisodeSet& demos,
                                     const std::vector<int64_t>& steps, const std::string& features) {
  const std::size_t chunk = static_cast<std::size_t>(64 * policy.config().obs_horizon);
  std::vector<at::Tensor> out;
  for (std::size_t i = 0; i < steps.size(); i += chunk) {
    const std::vector<int64_t> part(steps.begin() + static_cast<std::ptrdiff_t>(i),
                                    steps.begin() + static_cast<std::ptrdiff_t>(std::min(steps.size(), i + chunk)));
    out.push_back(frame_features(policy, demos, part, features).to(at::kDouble));
  }
  return at::cat(out);
}

RidgeFit ridge_fit(const at::Tensor& x_in, const at::Tensor& y_in, double lambda) {
  if (x_in.dim() != 2 || y_in.dim() != 2 || x_in.size(0) != y_in.size(0) || x_in.size(0) < 2)
    throw UsageError("ridge_fit: x [n, d] and y [n, k] with the same n >= 2, got " + c10::str(x_in.sizes()) + " and " +
                     c10::str(y_in.sizes()));
  const at::Tensor x = x_in.to(at::kDouble), y = y_in.to(at::kDouble);
  RidgeFit fit;
  fit.mean = x.mean(0);
  // Constant features get scale 1: they standardise to 0 and the ridge keeps their weight at 0.
  const at::Tensor sd = x.std(0, /*unbiased=*/false);
  fit.scale = at::where(sd > 1e-12, sd, at::ones_like(sd));
  const int64_t n = x.size(0), d = x.size(1);
  const at::Tensor z = at::cat({(x - fit.mean) / fit.scale, at::ones({n, 1}, x.options())}, 1);
  at::Tensor a = z.t().mm(z) / static_cast<double>(n);
  // Ridge on the weights, not on the bias.
  at::Tensor reg = at::full({d + 1}, lambda, x.options());
  reg[d] = 0.0;
  a = a + at::diag(reg);
  fit.weights = at::linalg_solve(a, z.t().mm(y) / static_cast<double>(n));
  return fit;
}

at::Tensor ridge_predict(const RidgeFit& fit, const at::Tensor& x_in) {
  const at::Tensor x = x_in.to(at::kDouble);
  const at::Tensor z = at::cat({(x - fit.mean) / fit.scale, at::ones({x.size(0), 1}, x.options())}, 1);
  return z.mm(fit.weights);
}

void pose_errors(const at::Tensor& predicted, const at::Tensor& truth, double* position_rmse, double* angle_median_deg) {
  const at::Tensor d = predicted.narrow(1, 0, 2) - truth.narrow(1, 0, 2);
  *position_rmse = std::sqrt(d.pow(2).sum(1).mean().item<double>());
  const at::Tensor a = at::atan2(predicted.select(1, 3), predicted.select(1, 2)),
                   b = at::atan2(truth.select(1, 3), truth.select(1, 2));
  // The wrapped difference in (-pi, pi].
  const at::Tensor diff = at::remainder(a - b + M_PI, 2 * M_PI) - M_PI;
  std::vector<double> e(static_cast<std::size_t>(diff.size(0)));
  const at::Tensor abs_deg = diff.abs().mul(180.0 / M_PI).contiguous();
  std::copy(abs_deg.data_ptr<double>(), abs_deg.data_ptr<double>() + abs_deg.numel(), e.begin());
  std::sort(e.begin(), e.end());
  const std::size_t m = e.size();
  *angle_median_deg = m == 0 ? 0.0 : (m % 2 ? e[m / 2] : 0.5 * (e[m / 2 - 1] + e[m / 2]));
}

nlohmann::json BlockPoseProbeResult::to_json() const {
  return {{"fit_frames", fit_frames},
          {"test_frames", test_frames},
          {"feature_dim", feature_dim},
          {"features", features},
          {"position_rmse", position_rmse},
          {"angle_median_deg", angle_median_deg},
          {"baseline_position_rmse", baseline_position_rmse},
          {"baseline_angle_median_deg", baseline_angle_median_deg}};
}

std::string BlockPoseProbeResult::to_table() const {
  std::string s = fmt::format("block pose from the encoder's {} (ridge readout of {} dims, {} frames fitted, {} probed):\n",
                              features == "tokens" ? "patch tokens" : "readout features", feature_dim, fit_frames,
                              test_frames);
  s += fmt::format("  position RMSE {:.1f} (of the 512-unit workspace)   median angle error {:.1f} deg\n", position_rmse,
                   angle_median_deg);
  s += fmt::format("  blind (the mean pose): {:.1f}                          {:.1f} deg", baseline_position_rmse,
                   baseline_angle_median_deg);
  return s;
}

BlockPoseProbeResult probe_block_pose(DiffusionPolicy& policy, const episodes::EpisodeSet& demos,
                                      const BlockPoseProbeOptions& options) {
  if (!policy.has_encoder()) throw UsageError("the block-pose probe needs an image policy; this one is low-dim");
  if (demos.state_dim < 5) throw UsageError("the block-pose probe needs PushT states (agent x, y, block x, y, angle)");
  const int64_t first = probe_first_episode(demos.episodes(), options.first_episode);
  if (first == 0) throw UsageError("the block-pose probe needs episodes before the probed ones to fit its readout");
  const int64_t split = demos.episode_begin(first);
  const std::vector<int64_t> fit_steps = spaced_steps(0, split, options.max_fit_frames),
                             test_steps = spaced_steps(split, demos.steps(), options.max_test_frames);
  if (fit_steps.size() < 2 || test_steps.empty())
    throw UsageError("the block-pose probe found too few frames (" + std::to_string(fit_steps.size()) + " to fit, " +
                     std::to_string(test_steps.size()) + " to probe)");
  EvalModeScope eval_mode(policy);
  at::NoGradGuard no_grad;
  const at::Tensor fit_x = frame_features_in_batches(policy, demos, fit_steps, options.features);
  const at::Tensor fit_y = block_poses(demos, fit_steps);
  const at::Tensor test_x = frame_features_in_batches(policy, demos, test_steps, options.features);
  const at::Tensor test_y = block_poses(demos, test_steps);
  BlockPoseProbeResult r;
  r.features = options.features;
  r.fit_frames = fit_x.size(0);
  r.test_frames = test_x.size(0);
  r.feature_dim = fit_x.size(1);
  const RidgeFit fit = ridge_fit(fit_x, fit_y, options.ridge);
  pose_errors(ridge_predict(fit, test_x), test_y, &r.position_rmse, &r.angle_median_deg);
  pose_errors(fit_y.mean(0, /*keepdim=*/true).expand_as(test_y), test_y, &r.baseline_position_rmse,
              &r.baseline_angle_median_deg);
  return r;
}

}  // namespace sparsevit::policy
