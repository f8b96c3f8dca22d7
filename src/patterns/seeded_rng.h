// Portable seeded randomness for the mask generators (docs/conventions.md, "Randomness and determinism").
//
// std::mt19937_64's output sequence for a given 64-bit seed is fixed by the C++ standard, but
// std::shuffle and std::uniform_int_distribution are not (libstdc++, libc++ and MSVC differ).
// Everything here therefore draws raw 64-bit words from std::mt19937_64 and turns them into
// integers / permutations / samples with explicit, documented algorithms, so a given
// (seed, layer, stream) produces the same masks on every platform.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace sparsevit::patterns {

// splitmix64 finaliser (Steele, Lea & Flood 2014; the constants of Vigna's splitmix64.c):
//   z = x + 0x9E3779B97F4A7C15
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//   return z ^ (z >> 31)
uint64_t splitmix64(uint64_t x);

// The 64-bit seed of make_rng:
//   mix_seed(seed, layer, stream) = splitmix64(splitmix64(splitmix64(seed) ^ layer) ^ stream)
uint64_t mix_seed(uint64_t seed, uint64_t layer, uint64_t stream = 0);

// std::mt19937_64(mix_seed(seed, layer, stream)). Use a distinct `stream` for each independent
// random decision within one layer (e.g. 0 = head permutation, 1 = random keys).
std::mt19937_64 make_rng(uint64_t seed, uint64_t layer, uint64_t stream = 0);

// A uniform integer in [0, n), n >= 1 (throws std::invalid_argument for n == 0). Unbiased by
// rejection: with t = (2^64 - n) mod n, draw r = rng() until r >= t and return r mod n
// (the accepted range [t, 2^64) holds a multiple of n values). Consumes >= 1 draw.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n);

// Explicit Fisher–Yates: for i = size-1 down to 1: j = uniform_below(rng, i + 1); swap(v[i], v[j]).
template <class T>
void fisher_yates_shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i-- > 1;) {
    const std::size_t j = static_cast<std::size_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
    using std::swap;
    swap(v[i], v[j]);
  }
}

// 0..n-1 shuffled by fisher_yates_shuffle with make_rng(seed, layer, 0). n <= 0 -> empty.
std::vector<int32_t> seeded_permutation(uint64_t seed, uint64_t layer, int32_t n);

// `count` distinct integers drawn uniformly from [lo, hi), returned sorted ascending
// (Floyd's algorithm: for j = m-count .. m-1 (m = hi-lo): t = uniform_below(j+1);
// take t unless already taken, else take j). count is clamped to hi-lo; count <= 0 or
// hi <= lo gives an empty vector.
std::vector<int32_t> sample_without_replacement(std::mt19937_64& rng, int32_t lo, int32_t hi,
                                                int32_t count);

}  // namespace sparsevit::patterns
