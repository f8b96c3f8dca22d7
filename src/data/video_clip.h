// One decoded video clip: every frame as uint8 [C, T, H, W] and its frame rate. What the video
// readers (FFmpeg files, frame folders, the generated moving_fashion_mnist) return and what
// the clip sampler (data/video_sampling.h) takes.
#pragma once

#include <ATen/core/Tensor.h>

namespace sparsevit::data {

struct VideoClip {
  at::Tensor frames;  // uint8 [C, T, H, W], C = 1 (gray) or 3 (RGB)
  double fps = 30.0;  // frames per second (frame folders and generated clips: the nominal rate)
};

}  // namespace sparsevit::data
