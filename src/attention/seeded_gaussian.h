// Standard normal samples from the project's portable seeded RNG (patterns/seeded_rng.h) by an
// explicit Box-Muller transform, so random features and LSH rotations are the same for a seed
// on every platform and LibTorch version, and never touch the global torch RNG.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace sparsevit::attention {

// float64 CPU tensor of `sizes`, filled from make_rng(seed, layer, stream).
at::Tensor seeded_gaussian(uint64_t seed, uint64_t layer, uint64_t stream, c10::IntArrayRef sizes);

}  // namespace sparsevit::attention
