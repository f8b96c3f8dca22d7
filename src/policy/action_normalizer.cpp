#include "policy/action_normalizer.h"

#include <string>
#include <utility>

#include "util/errors.h"

namespace sparsevit::policy {

ActionNormalizer::ActionNormalizer(at::Tensor scale, at::Tensor offset) {
  if (!scale.defined() || !offset.defined() || scale.dim() != 1 || scale.sizes() != offset.sizes())
    throw UsageError("normalizer: scale and offset must both be [D]");
  if ((scale == 0).any().item<bool>()) throw UsageError("normalizer: a zero scale cannot be inverted");
  scale_ = scale.detach().to(at::kFloat).clone();
  offset_ = offset.detach().to(at::kFloat).clone();
}

ActionNormalizer ActionNormalizer::fit(const at::Tensor& data, const NormalizerLimits& limits) {
  if (!data.defined() || data.dim() < 1 || data.numel() == 0)
    throw UsageError("normalizer: fit needs non-empty data [..., D]");
  if (!(limits.output_max > limits.output_min)) throw UsageError("normalizer: output_max must exceed output_min");
  const int64_t dim = data.size(-1);
  const at::Tensor flat = data.detach().to(at::kFloat).reshape({-1, dim});
  const at::Tensor input_min = std::get<0>(flat.min(0)), input_max = std::get<0>(flat.max(0));
  const double out_span = limits.output_max - limits.output_min;
  at::Tensor range = input_max - input_min;
  const at::Tensor ignore = range < limits.range_eps;
  range = at::where(ignore, at::full_like(range, out_span), range);
  const at::Tensor scale = out_span / range;
  at::Tensor offset = limits.output_min - scale * input_min;
  offset = at::where(ignore, (limits.output_max + limits.output_min) / 2 - input_min, offset);
  return ActionNormalizer(scale, offset);
}

void ActionNormalizer::check_input(const at::Tensor& x, const char* what) const {
  if (!fitted()) throw UsageError(std::string("normalizer: ") + what + " before fit");
  if (x.dim() < 1 || x.size(-1) != dim())
    throw UsageError(std::string("normalizer: ") + what + " expects [..., " + std::to_string(dim()) + "], got " +
                     c10::str(x.sizes()));
}

at::Tensor ActionNormalizer::normalize(const at::Tensor& x) const {
  check_input(x, "normalize");
  return x.to(scale_.device(), at::kFloat) * scale_ + offset_;
}

at::Tensor ActionNormalizer::unnormalize(const at::Tensor& y) const {
  check_input(y, "unnormalize");
  return (y.to(scale_.device(), at::kFloat) - offset_) / scale_;
}

}  // namespace sparsevit::policy
