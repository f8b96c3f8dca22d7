// PythonRandom: CPython 3's `random.Random` (MT19937), bit-exact for the operations the
// `compat: reference` Fibottention mask needs (docs/masks.md, `compat: reference`): seeding from an int,
// getrandbits, random(), _randbelow and shuffle.
//
// Reproduces CPython's Modules/_randommodule.c and Lib/random.py:
//   * seed(n): key = abs(n) split into 32-bit words, least significant first ([0] for n = 0),
//     then init_by_array(key), which starts from init_genrand(19650218).
//   * getrandbits(k), k <= 32: the top k bits of one output; k > 32: ceil(k/32) outputs
//     filling 32-bit words little-endian, the last one shifted right to keep its top bits.
//   * random(): a = out >> 5, b = out >> 6, (a * 2^26 + b) / 2^53.
//   * randbelow(n) = Random._randbelow_with_getrandbits: k = n.bit_length(), draw
//     getrandbits(k) until < n. Unchanged from CPython 3.2 through 3.14 (proposals to use
//     (n-1).bit_length() were rejected to keep sequences reproducible: gh-81181, gh-117388).
//   * shuffle(x): for i in reversed(range(1, len(x))): j = randbelow(i + 1); swap(x[i], x[j]).
// Verified against CPython 3.11.7 (tests/patterns/python_random_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sparsevit::patterns {

class PythonRandom {
 public:
  // Equivalent to `random.Random(seed)`.
  explicit PythonRandom(int64_t seed = 0) { this->seed(seed); }

  // random.seed(n) for a Python int n (the sign is ignored, as in CPython).
  void seed(int64_t n);
  void seed_unsigned(uint64_t n);
  // random.seed(n) for an arbitrary non-negative int given as 32-bit words of abs(n),
  // least significant first. Trailing zero words are dropped as CPython does; {} means 0.
  void seed_words(std::vector<uint32_t> words);

  // One raw MT19937 output (genrand_uint32 in CPython).
  uint32_t genrand_uint32();

  // random.getrandbits(k) for 0 <= k <= 64; throws std::invalid_argument otherwise.
  uint64_t getrandbits(int k);
  // random.getrandbits(k) for any k >= 0 as 32-bit words, least significant first
  // (ceil(k/32) words; empty for k = 0).
  std::vector<uint32_t> getrandbits_words(int64_t k);

  // random.random(): a double in [0, 1) with 53 random bits.
  double random();

  // random.Random._randbelow(n) for n >= 1 (throws std::invalid_argument for n == 0).
  uint64_t randbelow(uint64_t n);

  // random.shuffle(x).
  template <class T>
  void shuffle(std::vector<T>& x) {
    for (std::size_t i = x.size(); i-- > 1;) {
      const std::size_t j = static_cast<std::size_t>(randbelow(static_cast<uint64_t>(i) + 1));
      using std::swap;
      swap(x[i], x[j]);
    }
  }

 private:
  static constexpr int kN = 624;
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);

  std::array<uint32_t, kN> mt_{};
  int index_ = kN + 1;
};

// `l = list(range(n)); random.seed(seed); random.shuffle(l)` -> l. n <= 0 gives an empty list.
std::vector<int32_t> python_shuffled_range(int64_t seed, int32_t n);

}  // namespace sparsevit::patterns
