// Portable random draws for data augmentation and shuffling: every draw is spelled out
// (no std::*_distribution, whose results differ between standard libraries), so a seed
// gives the same augmentation and the same epoch order everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace sparsevit::data {

using Rng = std::mt19937_64;

// One step of splitmix64 (Steele et al.): a strong 64-bit mixer for deriving seeds.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A seed derived from several integers; different tuples give unrelated streams.
inline uint64_t mix_seed(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
  uint64_t h = splitmix64(a);
  h = splitmix64(h ^ b);
  h = splitmix64(h ^ c);
  h = splitmix64(h ^ d);
  return h;
}

// Stream tags, so the shuffle and the per-sample augmentation never share a stream.
enum class RngStream : uint64_t { kShuffle = 1, kSample = 2, kBatch = 3 };

// The generator for one purpose within (seed, epoch, index).
inline Rng make_rng(uint64_t seed, RngStream stream, int64_t epoch, int64_t index = 0) {
  return Rng(mix_seed(seed, static_cast<uint64_t>(stream), static_cast<uint64_t>(epoch),
                      static_cast<uint64_t>(index)));
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform in [lo, hi).
inline double uniform(Rng& rng, double lo, double hi) { return lo + (hi - lo) * uniform01(rng); }

// Uniform integer in [0, n) by rejection (unbiased); n > 0.
inline uint64_t below(Rng& rng, uint64_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

// Uniform integer in [lo, hi); hi > lo.
inline int64_t randint(Rng& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(below(rng, static_cast<uint64_t>(hi - lo)));
}

inline bool bernoulli(Rng& rng, double p) { return p >= 1.0 || (p > 0.0 && uniform01(rng) < p); }

// Normal(mean, stddev) by Box-Muller (one of the pair).
inline double normal(Rng& rng, double mean, double stddev) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]
  const double u2 = uniform01(rng);
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

// Explicit Fisher-Yates shuffle (std::shuffle differs between standard libraries).
template <class T>
void fisher_yates(std::vector<T>& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(below(rng, i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace sparsevit::data
