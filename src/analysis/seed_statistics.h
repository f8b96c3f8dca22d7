// What a result over seeds is reported with (issue 16's evidence): the mean, the sample standard
// deviation, a confidence interval from Student's t distribution over the seeds, and the paired
// difference to a baseline run with the same seeds (same seed = same data order), with its own
// interval. Standard library only.
#pragma once

#include <vector>

namespace sparsevit::analysis {

// The two-sided quantile of Student's t distribution with `dof` degrees of freedom:
// t such that P(|T| <= t) = confidence (0.95 -> 12.706 at 1 dof, 2.776 at 4). UsageError for
// dof < 1 or confidence outside (0, 1).
double student_t_quantile(double confidence, double dof);

struct SeedSummary {
  int n = 0;
  double mean = 0;
  double std = 0;                  // sample standard deviation (n - 1); 0 for a single value
  double ci_low = 0, ci_high = 0;  // mean -/+ t * std / sqrt(n); both the mean when n < 2
};

// `values` one per seed. UsageError when empty.
SeedSummary summarize_seeds(const std::vector<double>& values, double confidence = 0.95);

// The per-seed differences treatment[i] - baseline[i] summarised as above (a paired t
// interval). UsageError when the lengths differ or are 0.
SeedSummary paired_difference(const std::vector<double>& treatment, const std::vector<double>& baseline,
                              double confidence = 0.95);

// Whether two results' intervals do not overlap (what a report may mark as a separation).
bool intervals_separate(const SeedSummary& a, const SeedSummary& b);

}  // namespace sparsevit::analysis
