#include "analysis/seed_statistics.h"

#include <cmath>
#include <numeric>

#include "util/errors.h"

namespace sparsevit::analysis {
namespace {

// The regularised incomplete beta function I_x(a, b) by its continued fraction (Lentz's method),
// using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(b, a, 1 - x);
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x)) / a;
  const double tiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::fabs(d) < tiny ? tiny : d);
  double f = d;
  for (int m = 1; m <= 500; ++m) {
    for (int pass = 0; pass < 2; ++pass) {
      const double num = pass == 0 ? m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
                                   : -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
      d = 1 + num * d;
      d = 1 / (std::fabs(d) < tiny ? tiny : d);
      c = 1 + num / c;
      if (std::fabs(c) < tiny) c = tiny;
      f *= c * d;
      if (pass == 1 && std::fabs(c * d - 1) < 1e-15) return front * f;
    }
  }
  return front * f;
}

// P(|T| <= t) for Student's t with `dof` degrees of freedom.
double two_sided_probability(double t, double dof) { return 1 - incomplete_beta(dof / 2, 0.5, dof / (dof + t * t)); }

SeedSummary summarize(const std::vector<double>& v, double confidence) {
  SeedSummary s;
  s.n = static_cast<int>(v.size());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / s.n;
  s.ci_low = s.ci_high = s.mean;
  if (s.n < 2) return s;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(ss / (s.n - 1));
  const double half = student_t_quantile(confidence, s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
  s.ci_low = s.mean - half;
  s.ci_high = s.mean + half;
  return s;
}

}  // namespace

double student_t_quantile(double confidence, double dof) {
  if (!(dof >= 1)) throw UsageError("student_t_quantile: degrees of freedom must be >= 1");
  if (!(confidence > 0 && confidence < 1)) throw UsageError("student_t_quantile: confidence must lie in (0, 1)");
  double lo = 0, hi = 1;
  while (two_sided_probability(hi, dof) < confidence) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (two_sided_probability(mid, dof) < confidence ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

SeedSummary summarize_seeds(const std::vector<double>& values, double confidence) {
  if (values.empty()) throw UsageError("summarize_seeds: no values");
  return summarize(values, confidence);
}

SeedSummary paired_difference(const std::vector<double>& treatment, const std::vector<double>& baseline,
                              double confidence) {
  if (treatment.empty() || treatment.size() != baseline.size())
    throw UsageError("paired_difference: needs the same seeds on both sides (" + std::to_string(treatment.size()) +
                     " vs " + std::to_string(baseline.size()) + " values)");
  std::vector<double> d(treatment.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = treatment[i] - baseline[i];
  return summarize(d, confidence);
}

bool intervals_separate(const SeedSummary& a, const SeedSummary& b) {
  return a.ci_high < b.ci_low || b.ci_high < a.ci_low;
}

}  // namespace sparsevit::analysis
