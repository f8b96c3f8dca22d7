// Diffusion Policy's LinearNormalizer in `limits` mode (model/common/normalizer.py, _fit with
// fit_offset): per dimension, x -> x * scale + offset with
//   scale = (output_max - output_min) / (max - min),  offset = output_min - scale * min,
// so the fitted data spans [output_min, output_max] = [-1, 1]. A dimension whose range is below
// range_eps (1e-4) gets scale 1 and offset (output_max + output_min) / 2 - min: its value maps
// to 0, shifted but not stretched. Statistics and parameters are float32 like the original.
// State is the two tensors `scale` and `offset` [D] (a module registers them as buffers).
#pragma once

#include <ATen/ATen.h>

namespace sparsevit::policy {

struct NormalizerLimits {
  double output_min = -1.0, output_max = 1.0, range_eps = 1e-4;
};

class ActionNormalizer {
 public:
  ActionNormalizer() = default;  // unfitted: normalize / unnormalize throw
  // Restores a saved normalizer: scale and offset [D], float32.
  ActionNormalizer(at::Tensor scale, at::Tensor offset);

  // data [..., D] (every leading index one sample, e.g. [N, D] or [N, T, D]).
  static ActionNormalizer fit(const at::Tensor& data, const NormalizerLimits& limits = {});

  at::Tensor normalize(const at::Tensor& x) const;    // x * scale + offset, [..., D], float32
  at::Tensor unnormalize(const at::Tensor& y) const;  // (y - offset) / scale

  bool fitted() const { return scale_.defined(); }
  int64_t dim() const { return fitted() ? scale_.size(0) : 0; }
  const at::Tensor& scale() const { return scale_; }
  const at::Tensor& offset() const { return offset_; }

 private:
  void check_input(const at::Tensor& x, const char* what) const;

  at::Tensor scale_, offset_;
};

}  // namespace sparsevit::policy
