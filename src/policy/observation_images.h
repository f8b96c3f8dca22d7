// Camera frames as the policy's encoder takes them, written once for training batches and for
// closed-loop rollouts: RGB uint8 HWC frames -> float [count, 3, S, S] in [0, 1], area-averaged
// when stored at another size (demonstrations at 96 px, a CPU encoder at 48).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace sparsevit::policy {

// `count` square frames of height x width x 3 bytes, contiguous at `frames` -> [count, 3, size,
// size] (adaptive average pooling: exact area averaging when size divides the side). UsageError
// for empty or non-square frames.
at::Tensor observation_images(const uint8_t* frames, int64_t count, int64_t height, int64_t width, int64_t size);

}  // namespace sparsevit::policy
