#include "patterns/seeded_rng.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

namespace sparsevit::patterns {

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t mix_seed(uint64_t seed, uint64_t layer, uint64_t stream) {
  return splitmix64(splitmix64(splitmix64(seed) ^ layer) ^ stream);
}

std::mt19937_64 make_rng(uint64_t seed, uint64_t layer, uint64_t stream) {
  return std::mt19937_64(mix_seed(seed, layer, stream));
}

uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  if (n == 0) throw std::invalid_argument("uniform_below: n must be at least 1");
  // (2^64 - n) mod n == 2^64 mod n, computed in 64-bit arithmetic.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = static_cast<uint64_t>(rng());
    if (r >= threshold) return r % n;
  }
}

std::vector<int32_t> seeded_permutation(uint64_t seed, uint64_t layer, int32_t n) {
  std::vector<int32_t> perm;
  if (n <= 0) return perm;
  perm.resize(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  auto rng = make_rng(seed, layer, 0);
  fisher_yates_shuffle(perm, rng);
  return perm;
}

std::vector<int32_t> sample_without_replacement(std::mt19937_64& rng, int32_t lo, int32_t hi,
                                                int32_t count) {
  std::vector<int32_t> out;
  if (count <= 0 || hi <= lo) return out;
  const int64_t m = static_cast<int64_t>(hi) - static_cast<int64_t>(lo);
  const int64_t k = std::min<int64_t>(count, m);
  std::set<int64_t> chosen;
  for (int64_t j = m - k; j < m; ++j) {
    const auto t = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(j) + 1));
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  out.reserve(chosen.size());
  for (int64_t v : chosen) out.push_back(static_cast<int32_t>(v + lo));
  return out;
}

}  // namespace sparsevit::patterns
