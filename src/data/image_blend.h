// Blending an image toward a degenerate one (PIL's ImageEnhance: contrast, saturation, sharpness,
// brightness), shared by the colour jitter (transforms.cpp) and RandAugment (rand_augment.cpp).
#pragma once

#include <ATen/ATen.h>

namespace sparsevit::data {

// degenerate + factor * (image - degenerate), clamped to [0, 1].
inline at::Tensor blend(const at::Tensor& image, const at::Tensor& degenerate, double factor) {
  return (degenerate + (image - degenerate) * factor).clamp_(0.0, 1.0);
}

}  // namespace sparsevit::data
