#include "policy/observation_images.h"

#include <ATen/ATen.h>

#include "util/errors.h"

namespace sparsevit::policy {

at::Tensor observation_images(const uint8_t* frames, int64_t count, int64_t height, int64_t width, int64_t size) {
  if (count < 1 || height < 1 || width < 1 || size < 1)
    throw UsageError("observation images: empty frames or size");
  if (height != width) throw UsageError("observation images must be square, got " + std::to_string(height) + "x" +
                                        std::to_string(width));
  at::Tensor x = at::from_blob(const_cast<uint8_t*>(frames), {count, height, width, 3}, at::kByte)
                     .permute({0, 3, 1, 2})
                     .to(at::kFloat)
                     .div_(255.0);
  if (height != size) x = at::adaptive_avg_pool2d(x, {size, size});
  return x.contiguous();
}

}  // namespace sparsevit::policy
