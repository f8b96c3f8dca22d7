// Integer sequences behind the diagonal masks: Wythoff rows, generalized Fibonacci
// sequences and the ablation sequences of the Fibottention paper. Exact integer arithmetic.
#pragma once

#include <cstdint>
#include <vector>

namespace sparsevit::patterns {

// floor(sqrt(n)), exact for every 64-bit n.
uint64_t isqrt(uint64_t n);
// floor(n * phi) with phi the golden ratio, exact: (n + isqrt(5 n^2)) / 2.
uint64_t floor_times_phi(uint64_t n);

struct SequenceSeed {
  int64_t a = 0;
  int64_t b = 0;
  bool operator==(const SequenceSeed& o) const { return a == o.a && b == o.b; }
};

// Row i >= 1 of the Wythoff array: m = floor(i phi), a = floor(m phi), b = a + m = floor(m phi^2).
// Rows start (1,2), (4,7), (6,10), (9,15), (12,20); they partition the positive integers.
SequenceSeed wythoff_row(int64_t i);
// Two predecessors prepended: b' = b - a, a' = a - b'. Rows (0,1), (1,3), (2,4), (3,6), (4,8).
SequenceSeed modified_wythoff_row(int64_t i);

// The generalized Fibonacci sequence a, b, a+b, ... keeping the terms <= limit (in order,
// repeats kept, e.g. Fib(1,1) = 1, 1, 2, 3, 5). Stops at the first term above the limit.
std::vector<int64_t> fibonacci_terms(SequenceSeed seed, int64_t limit);
// The first `count` terms of a, b, a+b, ... (the Wythoff array row itself).
std::vector<int64_t> fibonacci_prefix(SequenceSeed seed, int count);

// Ablation sequences, terms in [1, limit]:
std::vector<int64_t> power_terms(int64_t base, int64_t limit);                  // 1, b, b^2, ...
std::vector<int64_t> polynomial_terms(int exponent, int64_t limit);              // 1, 2^e, 3^e, ...
std::vector<int64_t> arithmetic_terms(int64_t step, int64_t shift, int64_t limit);  // shift + step*n > 0

}  // namespace sparsevit::patterns
