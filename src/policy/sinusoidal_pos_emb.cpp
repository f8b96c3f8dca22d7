#include "policy/sinusoidal_pos_emb.h"

#include <cmath>
#include <string>

#include "util/errors.h"

namespace sparsevit::policy {

SinusoidalPosEmbImpl::SinusoidalPosEmbImpl(int64_t dim) : dim_(dim) {
  // dim / 2 - 1 divides the log-frequency range: dim 2 would divide by zero.
  if (dim < 4 || dim % 2 != 0)
    throw UsageError("diffusion step embedding dim must be even and at least 4, got " + std::to_string(dim));
}

at::Tensor SinusoidalPosEmbImpl::forward(const at::Tensor& timesteps, at::ScalarType dtype) {
  if (timesteps.dim() != 1) throw UsageError("timesteps must be [B], got " + c10::str(timesteps.sizes()));
  const int64_t half = dim_ / 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  const auto options = timesteps.options().dtype(dtype);
  const at::Tensor freqs = at::exp(at::arange(half, options) * -step);
  const at::Tensor args = timesteps.to(dtype).unsqueeze(1) * freqs.unsqueeze(0);
  return at::cat({args.sin(), args.cos()}, -1);
}

}  // namespace sparsevit::policy
