#include "policy/block_pose_fit.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "policy/block_pose_probe.h"
#include "policy/eval_mode_scope.h"
#include "policy/image_probe.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

// Warm-up then cosine to 0 over `total` steps.
double scheduled_lr(const BlockPoseFitOptions& o, int64_t step) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  const double t = static_cast<double>(step - o.warmup_steps) / static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup_steps));
  return 0.5 * o.lr * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}

}  // namespace

nlohmann::json BlockPoseFitResult::to_json() const {
  return {{"steps", steps},
          {"train_frames", train_frames},
          {"test_frames", test_frames},
          {"final_loss", final_loss},
          {"position_rmse", position_rmse},
          {"angle_median_deg", angle_median_deg},
          {"train_position_rmse", train_position_rmse},
          {"train_angle_median_deg", train_angle_median_deg},
          {"baseline_position_rmse", baseline_position_rmse},
          {"baseline_angle_median_deg", baseline_angle_median_deg},
          {"seconds", seconds}};
}

std::string BlockPoseFitResult::to_table() const {
  std::string s = fmt::format("block pose fitted through the encoder ({} steps, {:.0f} s; final loss {:.4f}):\n", steps,
                              seconds, final_loss);
  s += fmt::format("  held out ({} frames): position RMSE {:.1f} (of the 512-unit workspace)   median angle error {:.1f} deg\n",
                   test_frames, position_rmse, angle_median_deg);
  s += fmt::format("  training ({} frames): {:.1f}   {:.1f} deg\n", train_frames, train_position_rmse, train_angle_median_deg);
  s += fmt::format("  blind (the mean pose): {:.1f}   {:.1f} deg", baseline_position_rmse, baseline_angle_median_deg);
  return s;
}

BlockPoseFitResult fit_block_pose(DiffusionPolicy& policy, const episodes::EpisodeSet& demos,
                                  const BlockPoseFitOptions& o, const std::function<void(int64_t, double)>& progress,
                                  int64_t progress_every) {
  if (!policy.has_encoder()) throw UsageError("the block-pose fit needs an image policy; this one is low-dim");
  if (demos.state_dim < 5) throw UsageError("the block-pose fit needs PushT states (agent x, y, block x, y, angle)");
  if (o.steps < 1 || o.batch_size < 1 || o.warmup_steps < 1 || o.lr <= 0)
    throw UsageError("the block-pose fit needs steps, batch_size, warmup_steps >= 1 and lr > 0");
  const int64_t first = probe_first_episode(demos.episodes(), o.first_episode);
  if (first == 0) throw UsageError("the block-pose fit needs episodes before the held-out ones to train on");
  const int64_t split = demos.episode_begin(first);
  const auto start = std::chrono::steady_clock::now();

  // Targets: position standardised by the training frames' mean and spread; cos, sin as they are.
  const std::vector<int64_t> train_steps = spaced_steps(0, split, o.max_test_frames),
                             test_steps = spaced_steps(split, demos.steps(), o.max_test_frames);
  if (test_steps.empty()) throw UsageError("the block-pose fit found no held-out frame");
  const at::Tensor train_truth = block_poses(demos, train_steps);
  const at::Tensor mean = train_truth.narrow(1, 0, 2).mean(0),
                   scale = train_truth.narrow(1, 0, 2).std(0).clamp_min(1e-6);
  const auto standardise = [&](const at::Tensor& pose) {
    return at::cat({(pose.narrow(1, 0, 2) - mean) / scale, pose.narrow(1, 2, 2)}, 1);
  };
  const auto destandardise = [&](const at::Tensor& z) {
    return at::cat({z.narrow(1, 0, 2) * scale + mean, z.narrow(1, 2, 2)}, 1);
  };

  torch::nn::Linear head(policy.feature_dim(), 4);
  std::vector<at::Tensor> params;
  for (const auto& p : policy.named_parameters())
    if (p.key().rfind("obs_encoder.", 0) == 0 || p.key().rfind("obs_readout.", 0) == 0) params.push_back(p.value());
  for (const auto& p : head->parameters()) params.push_back(p);
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));

  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> draw(0, split - 1);
  std::vector<int64_t> batch(static_cast<std::size_t>(o.batch_size));
  double tail_loss = 0;
  int64_t tail_count = 0;
  const int64_t tail_from = o.steps - std::max<int64_t>(1, o.steps / 10);
  policy.train();
  head->train();
  for (int64_t step = 0; step < o.steps; ++step) {
    for (auto& s : batch) s = draw(rng);
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(scheduled_lr(o, step));
    const at::Tensor target = standardise(block_poses(demos, batch)).to(at::kFloat);
    const at::Tensor loss = at::mse_loss(head->forward(frame_features(policy, demos, batch)), target);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    const double l = loss.item<double>();
    if (step >= tail_from) {
      tail_loss += l;
      ++tail_count;
    }
    if (progress && ((step + 1) % progress_every == 0 || step + 1 == o.steps)) progress(step + 1, l);
  }

  BlockPoseFitResult r;
  r.steps = o.steps;
  r.final_loss = tail_loss / static_cast<double>(tail_count);
  EvalModeScope eval_mode(policy);
  head->eval();
  at::NoGradGuard no_grad;
  const auto score = [&](const std::vector<int64_t>& steps, const at::Tensor& truth, double* rmse, double* angle) {
    const at::Tensor features = frame_features_in_batches(policy, demos, steps).to(at::kFloat);
    pose_errors(destandardise(head->forward(features).to(at::kDouble)), truth, rmse, angle);
  };
  const at::Tensor test_truth = block_poses(demos, test_steps);
  r.train_frames = static_cast<int64_t>(train_steps.size());
  r.test_frames = static_cast<int64_t>(test_steps.size());
  score(test_steps, test_truth, &r.position_rmse, &r.angle_median_deg);
  score(train_steps, train_truth, &r.train_position_rmse, &r.train_angle_median_deg);
  pose_errors(train_truth.mean(0, /*keepdim=*/true).expand_as(test_truth), test_truth, &r.baseline_position_rmse,
              &r.baseline_angle_median_deg);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace sparsevit::policy
