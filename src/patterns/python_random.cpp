#include "patterns/python_random.h"

#include <stdexcept>
#include <string>

namespace sparsevit::patterns {

namespace {
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;
constexpr int kM = 397;

int bit_length(uint64_t n) {
  int k = 0;
  while (n != 0) {
    ++k;
    n >>= 1;
  }
  return k;
}
}  // namespace

void PythonRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  index_ = kN;
}

void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  const size_t key_length = key.size();
  size_t i = 1;
  size_t j = 0;
  for (size_t k = (static_cast<size_t>(kN) > key_length ? kN : key_length); k != 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] +
             static_cast<uint32_t>(j);  // non-linear
    ++i;
    ++j;
    if (i >= static_cast<size_t>(kN)) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (size_t k = kN - 1; k != 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) -
             static_cast<uint32_t>(i);  // non-linear
    ++i;
    if (i >= static_cast<size_t>(kN)) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;  // MSB is 1; assuring non-zero initial array
  index_ = kN;
}

void PythonRandom::seed(int64_t n) {
  // abs() without overflow for INT64_MIN.
  const uint64_t magnitude =
      n < 0 ? static_cast<uint64_t>(0) - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  seed_unsigned(magnitude);
}

void PythonRandom::seed_unsigned(uint64_t n) {
  std::vector<uint32_t> words;
  words.push_back(static_cast<uint32_t>(n & 0xffffffffU));
  if ((n >> 32) != 0) words.push_back(static_cast<uint32_t>(n >> 32));
  seed_words(std::move(words));
}

void PythonRandom::seed_words(std::vector<uint32_t> words) {
  // CPython uses exactly ceil(bit_length / 32) words, and one zero word for 0.
  while (words.size() > 1 && words.back() == 0) words.pop_back();
  if (words.empty()) words.push_back(0);
  init_by_array(words);
}

uint32_t PythonRandom::genrand_uint32() {
  static constexpr uint32_t mag01[2] = {0x0U, kMatrixA};
  if (index_ >= kN) {
    int kk = 0;
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ mag01[y & 0x1U];
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
      mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ mag01[y & 0x1U];
    }
    const uint32_t y = (mt_[kN - 1] & kUpperMask) | (mt_[0] & kLowerMask);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

std::vector<uint32_t> PythonRandom::getrandbits_words(int64_t k) {
  if (k < 0) throw std::invalid_argument("getrandbits: number of bits must be non-negative");
  std::vector<uint32_t> words;
  words.reserve(static_cast<size_t>((k + 31) / 32));
  // Fill words least significant first; the last (partial) word keeps its top bits.
  for (int64_t left = k; left > 0; left -= 32) {
    uint32_t r = genrand_uint32();
    if (left < 32) r >>= (32 - left);
    words.push_back(r);
  }
  return words;
}

uint64_t PythonRandom::getrandbits(int k) {
  if (k < 0 || k > 64) {
    throw std::invalid_argument("getrandbits: k must be in [0, 64], got " + std::to_string(k));
  }
  if (k == 0) return 0;
  if (k <= 32) return genrand_uint32() >> (32 - k);
  const uint64_t lo = genrand_uint32();
  const uint64_t hi = genrand_uint32() >> (64 - k);
  return lo | (hi << 32);
}

double PythonRandom::random() {
  const uint32_t a = genrand_uint32() >> 5;
  const uint32_t b = genrand_uint32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  if (n == 0) throw std::invalid_argument("randbelow: n must be positive");
  const int k = bit_length(n);  // not (n-1): CPython draws k bits even for powers of two
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<int32_t> python_shuffled_range(int64_t seed, int32_t n) {
  std::vector<int32_t> list;
  if (n <= 0) return list;
  list.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) list[static_cast<size_t>(i)] = i;
  PythonRandom rng(seed);
  rng.shuffle(list);
  return list;
}

}  // namespace sparsevit::patterns
