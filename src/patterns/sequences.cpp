#include "patterns/sequences.h"

#include <cmath>
#include <stdexcept>

namespace sparsevit::patterns {

uint64_t isqrt(uint64_t n) {
  uint64_t r = static_cast<uint64_t>(std::sqrt(static_cast<long double>(n)));
  // Correct the floating estimate by at most a few steps, in 128-bit to avoid overflow.
  using u128 = unsigned __int128;
  while (r > 0 && static_cast<u128>(r) * r > n) --r;
  while (static_cast<u128>(r + 1) * (r + 1) <= n) ++r;
  return r;
}

uint64_t floor_times_phi(uint64_t n) {
  // 5 n^2 is never a perfect square for n > 0, so floor(n sqrt 5) = isqrt(5 n^2) and the
  // halving below equals floor((n + n sqrt 5) / 2) exactly.
  using u128 = unsigned __int128;
  const u128 five_n2 = static_cast<u128>(5) * n * n;
  if (five_n2 >> 64) throw std::overflow_error("floor_times_phi: argument too large");
  return (n + isqrt(static_cast<uint64_t>(five_n2))) / 2;
}

SequenceSeed wythoff_row(int64_t i) {
  if (i < 1) throw std::invalid_argument("Wythoff rows are numbered from 1");
  const uint64_t m = floor_times_phi(static_cast<uint64_t>(i));
  const uint64_t a = floor_times_phi(m);
  return {static_cast<int64_t>(a), static_cast<int64_t>(a + m)};
}

SequenceSeed modified_wythoff_row(int64_t i) {
  const SequenceSeed row = wythoff_row(i);
  const int64_t b = row.b - row.a;
  return {row.a - b, b};
}

std::vector<int64_t> fibonacci_terms(SequenceSeed seed, int64_t limit) {
  std::vector<int64_t> terms;
  int64_t x = seed.a, y = seed.b;
  // Guard x + y against a non-increasing seed (e.g. 0, 0) looping forever.
  while (x <= limit) {
    terms.push_back(x);
    const int64_t next = x + y;
    if (next <= y && y <= x) break;
    x = y;
    y = next;
  }
  return terms;
}

std::vector<int64_t> fibonacci_prefix(SequenceSeed seed, int count) {
  std::vector<int64_t> terms;
  int64_t x = seed.a, y = seed.b;
  for (int i = 0; i < count; ++i) {
    terms.push_back(x);
    const int64_t next = x + y;
    x = y;
    y = next;
  }
  return terms;
}

std::vector<int64_t> power_terms(int64_t base, int64_t limit) {
  if (base < 2) throw std::invalid_argument("power sequence base must be >= 2");
  std::vector<int64_t> terms;
  for (int64_t t = 1; t <= limit; t *= base) terms.push_back(t);
  return terms;
}

std::vector<int64_t> polynomial_terms(int exponent, int64_t limit) {
  std::vector<int64_t> terms;
  for (int64_t n = 1;; ++n) {
    int64_t t = 1;
    for (int e = 0; e < exponent; ++e) t *= n;
    if (t > limit) break;
    terms.push_back(t);
  }
  return terms;
}

std::vector<int64_t> arithmetic_terms(int64_t step, int64_t shift, int64_t limit) {
  if (step < 1) throw std::invalid_argument("arithmetic sequence step must be >= 1");
  std::vector<int64_t> terms;
  for (int64_t t = shift; t <= limit; t += step)
    if (t > 0) terms.push_back(t);
  return terms;
}

}  // namespace sparsevit::patterns
