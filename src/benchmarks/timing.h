// What every benchmark here times with: a steady clock and the median of repeats.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace sparsevit::benchmarks {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace sparsevit::benchmarks
