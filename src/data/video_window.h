// Reading only the frames a clip sampler picks (TimeSformer's PyAV path seeks to the sampled
// window instead of decoding the whole video). The reader tells the picker the video's frame
// count T and rate; the picker returns the frame indices of one view (data/video_sampling.h's
// train_clip_window / test_clip_window); the reader returns exactly those frames, the same
// pixels as the same indices of the whole decoded clip.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace sparsevit::data {

// (T, fps) -> frame indices in [0, T). A reader may call it a second time (when the container's
// declared frame count proves wrong and it decodes the whole video instead), so a picker that
// draws from a generator must restart from the same state on every call.
using FramePicker = std::function<std::vector<int64_t>(int64_t video_frames, double fps)>;

struct PickedFrames {
  at::Tensor frames;         // uint8 [C, K, H, W]: the picked frames in the picker's order (repeats kept)
  double fps = 30.0;         // the video's rate, as the picker was told
  int64_t video_frames = 0;  // the T the picker was last called with
  bool windowed = false;     // true: only a window was decoded / read; false: the whole video
};

// A video reader (data/video_dataset.h) that can read a window of its clips; the clip dataset
// (data/video_clip_dataset.h) uses it when the reader implements it. Thread-safe like `clip`.
class VideoWindowSource {
 public:
  virtual ~VideoWindowSource() = default;
  // The frames `pick` chooses of clip `index`; the same errors as VideoDataset::clip.
  virtual PickedFrames picked_frames(int64_t index, const FramePicker& pick) const = 0;
};

}  // namespace sparsevit::data
