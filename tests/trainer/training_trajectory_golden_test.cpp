// Golden training trajectory: ten steps of the tiny ViT with sparsevit's training building
// blocks (AdamW with timm's weight-decay groups, MAE's per-iteration warm-up + cosine learning
// rate, label-smoothing cross-entropy) against a float64 PyTorch reference of the same recipe
// (tests/golden/make_training_trajectory.py). A silent change in the optimizer (betas, eps,
// decay groups), the schedule, the loss or the backward of the model and its sparse operator
// changes the losses beyond the tolerances.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "golden/golden_fixture.h"
#include "golden/synthetic_batches.h"
#include "golden/training_trajectory_golden.inc"
#include "golden/vit_forward_golden.inc"
#include "golden/vit_tiny_weights.inc"
#include "models/vision_transformer.h"
#include "train/losses.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"

namespace sparsevit::golden {
namespace {

std::vector<SyntheticBatch> trajectory_batches() {
  const GoldenTrainingRecipe& r = kTrajectoryRecipe;
  return synthetic_batches(r.data_seed, r.epochs * r.iters_per_epoch, r.batch_size, kTinyVit.in_chans,
                           kTinyVit.img_size, kTinyVit.num_classes);
}

std::shared_ptr<models::VisionTransformer> golden_model(const std::string& attention_yaml, at::ScalarType dtype) {
  auto model = std::make_shared<models::VisionTransformer>(tiny_vit_config(kTinyVit, attention_yaml));
  cast_parameters(*model, dtype);
  load_parameters_by_name(*model, kTinyVitWeights);
  return model;
}

// The training steps of the recipe, written with the trainer's building blocks in the order
// the trainer runs them (lr for the fractional epoch, forward, loss, zero_grad, backward, AdamW
// step; no gradient clipping, mixup or augmentation). Returns the loss of every step.
// When the training engine exists, this is the one function to route through it.
std::vector<double> run_golden_training_steps(models::VisionTransformer& model, const std::vector<SyntheticBatch>& batches,
                                              const GoldenTrainingRecipe& r) {
  train::OptimizerConfig optimizer_config;
  optimizer_config.lr = r.lr;
  optimizer_config.weight_decay = r.weight_decay;
  optimizer_config.eps = r.opt_eps;
  optimizer_config.betas = {r.beta1, r.beta2};
  auto optimizer = train::make_adamw(model, optimizer_config);
  const train::LrScheduleConfig schedule{r.lr, r.min_lr, r.warmup_epochs, static_cast<double>(r.epochs)};
  const at::ScalarType dtype = model.parameters().front().scalar_type();
  const int64_t total_steps = r.epochs * r.iters_per_epoch;

  model.train();
  std::vector<double> losses;
  for (int64_t epoch = 0; epoch < r.epochs; ++epoch) {
    for (int64_t it = 0; it < r.iters_per_epoch; ++it) {
      const int64_t step = epoch * r.iters_per_epoch + it;
      train::set_learning_rate(*optimizer, train::cosine_lr(schedule, train::fractional_epoch(epoch, it, r.iters_per_epoch)));
      model.set_training_progress(static_cast<double>(step) / static_cast<double>(total_steps));
      const SyntheticBatch& batch = batches.at(step);
      const at::Tensor loss =
          train::label_smoothing_cross_entropy(model.forward(batch.images.to(dtype)), batch.labels, r.smoothing);
      optimizer->zero_grad();
      loss.backward();
      optimizer->step();
      losses.push_back(loss.item<double>());
    }
  }
  return losses;
}

struct TrajectoryResult {
  std::vector<double> losses;
  at::Tensor final_logits;  // float64, for kForwardImageValues
};

TrajectoryResult train_trajectory_case(const TrajectoryCase& c, at::ScalarType dtype) {
  auto model = golden_model(c.attention_yaml, dtype);
  TrajectoryResult result{run_golden_training_steps(*model, trajectory_batches(), kTrajectoryRecipe), {}};
  model->eval();
  at::NoGradGuard no_grad;
  result.final_logits = model->forward(tensor_from(kForwardImageValues, kForwardImageShape, dtype)).to(at::kDouble);
  return result;
}

// Every |actual - expected| <= atol + rtol |expected| (the loss steps and the final logits).
void expect_trajectory_near(const TrajectoryCase& c, const TrajectoryResult& got, double atol, double rtol) {
  const int64_t steps = kTrajectoryRecipe.epochs * kTrajectoryRecipe.iters_per_epoch;
  ASSERT_EQ(static_cast<int64_t>(got.losses.size()), steps) << c.name;
  for (int64_t i = 0; i < steps; ++i)
    EXPECT_NEAR(got.losses[i], c.losses[i], atol + rtol * std::abs(c.losses[i])) << c.name << " step " << i;
  const at::Tensor expected = tensor_from(c.final_logits, {kForwardImageShape[0], kTinyVit.num_classes});
  const double worst = ((got.final_logits - expected).abs() / (atol + rtol * expected.abs())).max().item<double>();
  EXPECT_LE(worst, 1.0) << c.name << ": final logits, max |diff| " << (got.final_logits - expected).abs().max().item<double>();
}

TEST(TrainingTrajectoryGolden, SyntheticBatchesMatchTheReferenceGenerator) {
  const auto batches = trajectory_batches();
  ASSERT_EQ(batches.size(), kTrajectoryBatchSums.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].images.to(at::kDouble).sum().item<double>(), kTrajectoryBatchSums[i].pixel_sum) << i;
    EXPECT_EQ(batches[i].labels.sum().item<int64_t>(), kTrajectoryBatchSums[i].label_sum) << i;
  }
}

// The trainer's loss on the golden model's logits (vit_forward_golden.inc): label smoothing
// 0.1 and plain cross-entropy, in float64.
TEST(TrainingTrajectoryGolden, LabelSmoothingLossOfTheGoldenModelMatchesTheReference) {
  ASSERT_EQ(kForwardSmoothing, kTrajectoryRecipe.smoothing);
  const at::Tensor labels = at::tensor(kForwardLabels, at::kLong);
  const at::Tensor images = tensor_from(kForwardImageValues, kForwardImageShape, at::kDouble);
  for (const auto& c : kVitForwardCases) {
    auto model = golden_model(c.attention_yaml, at::kDouble);
    model->eval();
    at::NoGradGuard no_grad;
    const at::Tensor logits = model->forward(images);
    EXPECT_NEAR(train::label_smoothing_cross_entropy(logits, labels, kForwardSmoothing).item<double>(),
                c.smoothed_cross_entropy, 1e-10)
        << c.name;
    EXPECT_NEAR(train::label_smoothing_cross_entropy(logits, labels, 0.0).item<double>(), c.cross_entropy, 1e-10)
        << c.name;
  }
}

// float64: the C++ and Python steps differ only in the order of floating-point operations
// (measured: at most ~1e-14 on the losses); 1e-9 hides nothing the recipe could change (one
// AdamW eps of 1e-8 instead of 1e-6, or weight decay on pos_embed, moves them by more than 1e-7).
TEST(TrainingTrajectoryGolden, Float64TrajectoryMatchesTheReference) {
  for (const auto& c : kTrajectoryCases) expect_trajectory_near(c, train_trajectory_case(c, at::kDouble), 1e-9, 1e-9);
}

// float32, as training runs: rounding grows over the ten steps (measured: 5e-7 on the losses,
// 1.4e-6 on the final logits); 2e-5 is more than ten times that.
TEST(TrainingTrajectoryGolden, Float32TrajectoryMatchesTheReference) {
  for (const auto& c : kTrajectoryCases) expect_trajectory_near(c, train_trajectory_case(c, at::kFloat), 2e-5, 2e-5);
}

}  // namespace
}  // namespace sparsevit::golden
