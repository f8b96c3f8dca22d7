#include "attention/seeded_gaussian.h"

#include <ATen/ATen.h>

#include <cmath>

#include "patterns/seeded_rng.h"

namespace sparsevit::attention {

at::Tensor seeded_gaussian(uint64_t seed, uint64_t layer, uint64_t stream, c10::IntArrayRef sizes) {
  at::Tensor out = at::empty(sizes, at::kDouble);
  double* data = out.data_ptr<double>();
  const int64_t n = out.numel();
  std::mt19937_64 rng = patterns::make_rng(seed, layer, stream);
  // 53 random bits -> (0, 1]: never 0, so log(u1) is finite.
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53; };
  const double two_pi = 2.0 * std::acos(-1.0);
  for (int64_t i = 0; i < n; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    const double angle = two_pi * uniform();
    data[i] = radius * std::cos(angle);
    if (i + 1 < n) data[i + 1] = radius * std::sin(angle);
  }
  return out;
}

}  // namespace sparsevit::attention
