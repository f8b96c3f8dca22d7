#include "patterns/sequences.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace sparsevit::patterns {
namespace {

TEST(Sequences, IsqrtIsExactAroundSquares) {
  for (uint64_t r : {0ULL, 1ULL, 2ULL, 3ULL, 1000ULL, 4294967295ULL, 3037000499ULL}) {
    const uint64_t sq = r * r;
    EXPECT_EQ(isqrt(sq), r);
    if (sq > 0) {
      EXPECT_EQ(isqrt(sq - 1), r - 1);
    }
    EXPECT_EQ(isqrt(sq + 1), r == 0 ? 1 : r);
  }
  EXPECT_EQ(isqrt(UINT64_MAX), 4294967295ULL);
}

TEST(Sequences, FloorTimesPhiMatchesLongDoubleForSmallN) {
  const long double phi = (1.0L + std::sqrt(5.0L)) / 2.0L;
  for (uint64_t n = 0; n < 20000; ++n) EXPECT_EQ(floor_times_phi(n), static_cast<uint64_t>(std::floor(n * phi))) << n;
}

TEST(Sequences, FirstWythoffRows) {
  // OEIS A035513 rows: 1,2,3,5,8 / 4,7,11,18 / 6,10,16,26 / 9,15,24,39 / 12,20,32,52.
  EXPECT_EQ(fibonacci_prefix(wythoff_row(1), 5), (std::vector<int64_t>{1, 2, 3, 5, 8}));
  EXPECT_EQ(fibonacci_prefix(wythoff_row(2), 4), (std::vector<int64_t>{4, 7, 11, 18}));
  EXPECT_EQ(fibonacci_prefix(wythoff_row(3), 4), (std::vector<int64_t>{6, 10, 16, 26}));
  EXPECT_EQ(fibonacci_prefix(wythoff_row(4), 4), (std::vector<int64_t>{9, 15, 24, 39}));
  EXPECT_EQ(fibonacci_prefix(wythoff_row(5), 4), (std::vector<int64_t>{12, 20, 32, 52}));
  EXPECT_EQ(wythoff_row(6), (SequenceSeed{14, 23}));
  EXPECT_EQ(wythoff_row(12), (SequenceSeed{30, 49}));
}

TEST(Sequences, ModifiedWythoffRows) {
  EXPECT_EQ(modified_wythoff_row(1), (SequenceSeed{0, 1}));
  EXPECT_EQ(modified_wythoff_row(2), (SequenceSeed{1, 3}));
  EXPECT_EQ(modified_wythoff_row(3), (SequenceSeed{2, 4}));
  EXPECT_EQ(modified_wythoff_row(4), (SequenceSeed{3, 6}));
  EXPECT_EQ(modified_wythoff_row(5), (SequenceSeed{4, 8}));
}

TEST(Sequences, WythoffRowsPartitionThePositiveIntegers) {
  // Every integer in [1, 1e5] appears in exactly one row (rows start at their first column,
  // which exceeds the limit once i > ~38000).
  const int64_t limit = 100000;
  std::vector<int> seen(limit + 1, 0);
  for (int64_t i = 1;; ++i) {
    const SequenceSeed row = wythoff_row(i);
    if (row.a > limit) break;
    for (int64_t t : fibonacci_terms(row, limit)) ++seen[t];
  }
  for (int64_t v = 1; v <= limit; ++v) ASSERT_EQ(seen[v], 1) << v;
}

TEST(Sequences, WythoffRowIsExactForLargeIndices) {
  // a(i) = floor(floor(i phi) phi); exact integer arithmetic must agree with the identities
  // of the Wythoff array: b = a + m and the rows' first columns are the lower Wythoff
  // sequence of the lower Wythoff sequence. Cross-check with 128-bit brute force for i ~ 1e6.
  for (int64_t i : {999983LL, 1000000LL, 123456789LL}) {
    const uint64_t m = floor_times_phi(i);
    // floor(i phi) is the unique m with m < i phi < m + 1  <=>  (2m - i)^2 < 5 i^2 < (2m + 2 - i)^2.
    using i128 = __int128;
    const i128 lo = static_cast<i128>(2 * m) - i, hi = static_cast<i128>(2 * m + 2) - i;
    const i128 five = static_cast<i128>(5) * i * i;
    EXPECT_TRUE(lo * lo < five && five < hi * hi) << i;
    const SequenceSeed row = wythoff_row(i);
    EXPECT_EQ(row.b - row.a, static_cast<int64_t>(m));
  }
}

TEST(Sequences, ModifiedRowsShareEachPairWithAtMostThreeRows) {
  const int64_t limit = 5000;
  std::vector<int> count(limit + 1, 0);
  for (int64_t i = 1; i <= 400; ++i) {
    std::set<int64_t> terms;
    for (int64_t t : fibonacci_terms(modified_wythoff_row(i), limit)) terms.insert(t);
    for (int64_t t : terms) ++count[t];
  }
  for (int64_t v = 1; v <= limit; ++v) EXPECT_LE(count[v], 3) << v;
}

TEST(Sequences, FibonacciTermsStopAtTheLimit) {
  EXPECT_EQ(fibonacci_terms({1, 1}, 10), (std::vector<int64_t>{1, 1, 2, 3, 5, 8}));
  EXPECT_EQ(fibonacci_terms({4, 7}, 3), (std::vector<int64_t>{}));
  EXPECT_EQ(fibonacci_terms({0, 1}, 5), (std::vector<int64_t>{0, 1, 1, 2, 3, 5}));
  EXPECT_EQ(fibonacci_terms({0, 0}, 5), (std::vector<int64_t>{0}));  // no infinite loop
}

TEST(Sequences, AblationSequences) {
  EXPECT_EQ(power_terms(2, 20), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(power_terms(3, 27), (std::vector<int64_t>{1, 3, 9, 27}));
  EXPECT_EQ(polynomial_terms(2, 30), (std::vector<int64_t>{1, 4, 9, 16, 25}));
  EXPECT_EQ(polynomial_terms(3, 64), (std::vector<int64_t>{1, 8, 27, 64}));
  EXPECT_EQ(arithmetic_terms(3, 0, 10), (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(arithmetic_terms(3, 2, 10), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_THROW(power_terms(1, 10), std::invalid_argument);
  EXPECT_THROW(arithmetic_terms(0, 0, 10), std::invalid_argument);
}

}  // namespace
}  // namespace sparsevit::patterns
