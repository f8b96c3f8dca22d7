// Seed statistics against SciPy 1.10 (Debian's python3-scipy), computed with:
//   scipy.stats.t.ppf(0.975, dof) for dof 1, 2, 4, 9, 29; t.ppf(0.995, 3); t.ppf(0.95, 2.5)
//   v = [79.1, 80.6, 79.1]: mean, std(ddof=1), mean -/+ t.ppf(0.975, 2) * std / sqrt(3)
//   a = [81.6, 82.2, 81.9]: the same for a - v (a paired interval)
#include "analysis/seed_statistics.h"

#include <gtest/gtest.h>

#include "util/errors.h"

namespace sparsevit::analysis {
namespace {

TEST(SeedStatistics, StudentTQuantilesMatchScipy) {
  EXPECT_NEAR(student_t_quantile(0.95, 1), 12.706204736, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.95, 2), 4.30265273, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.95, 4), 2.776445105, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.95, 9), 2.262157163, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.95, 29), 2.045229642, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.99, 3), 5.8409093, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.90, 2.5), 2.558218614, 1e-7);
  EXPECT_THROW(student_t_quantile(0.95, 0.5), UsageError);
  EXPECT_THROW(student_t_quantile(1.0, 3), UsageError);
}

TEST(SeedStatistics, MeanSampleStdAndTInterval) {
  const SeedSummary s = summarize_seeds({79.1, 80.6, 79.1});
  EXPECT_EQ(s.n, 3);
  EXPECT_NEAR(s.mean, 79.6, 1e-12);
  EXPECT_NEAR(s.std, 0.8660254037844386, 1e-12);
  EXPECT_NEAR(s.ci_low, 77.44867363504436, 1e-7);
  EXPECT_NEAR(s.ci_high, 81.75132636495563, 1e-7);
  const SeedSummary one = summarize_seeds({5.0});
  EXPECT_EQ(one.std, 0.0);
  EXPECT_EQ(one.ci_low, 5.0);
  EXPECT_THROW(summarize_seeds({}), UsageError);
}

TEST(SeedStatistics, PairedDifferenceUsesTheSameSeeds) {
  const SeedSummary d = paired_difference({81.6, 82.2, 81.9}, {79.1, 80.6, 79.1});
  EXPECT_NEAR(d.mean, 2.3, 1e-12);
  EXPECT_NEAR(d.std, 0.6244997998398396, 1e-12);
  EXPECT_NEAR(d.ci_low, 0.7486564961789857, 1e-7);
  EXPECT_NEAR(d.ci_high, 3.8513435038210275, 1e-7);
  EXPECT_THROW(paired_difference({1, 2}, {1}), UsageError);
  // Unpaired, the two intervals overlap; paired, the difference's interval excludes 0.
  EXPECT_FALSE(intervals_separate(summarize_seeds({81.6, 82.2, 81.9}), summarize_seeds({79.1, 80.6, 79.1})));
  EXPECT_GT(d.ci_low, 0.0);
  EXPECT_TRUE(intervals_separate(summarize_seeds({1.0, 1.1, 0.9}), summarize_seeds({5.0, 5.1, 4.9})));
}

}  // namespace
}  // namespace sparsevit::analysis
