#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "train/nan_guard.h"
#include "util/errors.h"

namespace sparsevit::train {
namespace {

LrScheduleConfig mae_config() { return {/*lr=*/1e-3, /*min_lr=*/1e-6, /*warmup_epochs=*/5, /*epochs=*/100}; }

// Reference values computed with MAE's util/lr_sched.adjust_learning_rate in Python.
TEST(LrSchedule, MatchesMaeAtKnownEpochs) {
  const auto c = mae_config();
  EXPECT_DOUBLE_EQ(cosine_lr(c, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(cosine_lr(c, 2.5), 0.0005);
  EXPECT_DOUBLE_EQ(cosine_lr(c, 5.0), 0.001);
  EXPECT_NEAR(cosine_lr(c, 27.5), 0.0008679940933812294, 1e-18);
  EXPECT_NEAR(cosine_lr(c, 52.5), 0.0005005000000000001, 1e-18);
  EXPECT_NEAR(cosine_lr(c, 99.9), 1.0027312259864862e-06, 1e-18);
  EXPECT_DOUBLE_EQ(cosine_lr(c, 100.0), 1e-06);
}

TEST(LrSchedule, PerIterationFractionalEpoch) {
  const double e = fractional_epoch(3, 117, 469);
  EXPECT_DOUBLE_EQ(e, 3.2494669509594885);
  EXPECT_NEAR(cosine_lr(mae_config(), e), 0.0006498933901918977, 1e-18);
  EXPECT_DOUBLE_EQ(fractional_epoch(0, 0, 10), 0.0);
  EXPECT_THROW(fractional_epoch(0, 0, 0), UsageError);
}

TEST(LrSchedule, WarmupIsLinearAndCosineIsMonotone) {
  const auto c = mae_config();
  double previous = -1;
  for (int i = 0; i <= 1000; ++i) {
    const double e = i * 0.1;
    const double lr = cosine_lr(c, e);
    if (e < 5) {
      EXPECT_NEAR(lr, 1e-3 * e / 5, 1e-15);
      EXPECT_GE(lr, previous);
    } else if (e > 5) {
      EXPECT_LE(lr, previous + 1e-18) << "epoch " << e;
    }
    previous = lr;
  }
}

TEST(LrSchedule, EdgeCases) {
  LrScheduleConfig no_warmup{1e-3, 0.0, 0.0, 10};
  EXPECT_DOUBLE_EQ(cosine_lr(no_warmup, 0.0), 1e-3);
  EXPECT_NEAR(cosine_lr(no_warmup, 5.0), 5e-4, 1e-18);
  // Warm-up as long as the run: linear all the way, min_lr at the very end (MAE would divide by 0).
  LrScheduleConfig all_warmup{1e-3, 1e-6, 2.0, 2};
  EXPECT_DOUBLE_EQ(cosine_lr(all_warmup, 1.0), 5e-4);
  EXPECT_DOUBLE_EQ(cosine_lr(all_warmup, 2.0), 1e-6);
  // Past the end the cosine is clamped instead of rising again.
  EXPECT_DOUBLE_EQ(cosine_lr(mae_config(), 150.0), 1e-6);
}

TEST(LrSchedule, Validation) {
  EXPECT_NO_THROW(validate(mae_config()));
  EXPECT_THROW(validate({-1e-3, 0, 0, 10}), UsageError);
  EXPECT_THROW(validate({1e-3, -1, 0, 10}), UsageError);
  EXPECT_THROW(validate({1e-3, 0, -1, 10}), UsageError);
  EXPECT_THROW(validate({1e-3, 0, 0, 0}), UsageError);
  EXPECT_THROW(validate({NAN, 0, 0, 10}), UsageError);
}

TEST(LrSchedule, EffectiveLrScalesWithBatch) {
  EXPECT_DOUBLE_EQ(effective_lr(1e-3, 256), 1e-3);
  EXPECT_DOUBLE_EQ(effective_lr(1e-3, 64), 2.5e-4);
  EXPECT_DOUBLE_EQ(effective_lr(5e-4, 1024), 2e-3);
  EXPECT_THROW(effective_lr(1e-3, 0), UsageError);
}

TEST(NanGuard, FiniteLossPasses) {
  EXPECT_NO_THROW(check_finite_loss(2.3, 0, 0));
  EXPECT_NO_THROW(check_finite_loss(0.0, 1, 5));
  EXPECT_NO_THROW(check_finite_loss(1e30, 1, 5));
}

TEST(NanGuard, NonFiniteLossStopsWithOneClearLine) {
  try {
    check_finite_loss(std::nan(""), 3, 120);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "loss is NaN at epoch 3 step 120 \u2014 lower the learning rate or enable --clip_grad");
  }
  try {
    check_finite_loss(INFINITY, 0, 7);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("loss is inf at epoch 0 step 7", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_THROW(check_finite_loss(-INFINITY, 0, 0), RuntimeError);
}

}  // namespace
}  // namespace sparsevit::train
