// The interface every video reader implements: a finite, indexable set of labelled clips
// (TimeSformer's Kinetics / SSv2 datasets before sampling). data/video_clip_dataset.h turns one
// into the model's training or test clips.
#pragma once

#include <cstdint>
#include <string>

#include "data/video_clip.h"

namespace sparsevit::data {

// `clip` and `label` must be safe to call from several threads at once (the loader's workers
// do); readers keep no mutable state.
class VideoDataset {
 public:
  virtual ~VideoDataset() = default;
  virtual int64_t size() const = 0;
  // Every frame of clip `index`, uint8 [channels(), T, H, W]. RuntimeError naming the file on
  // an unreadable, truncated or empty clip.
  virtual VideoClip clip(int64_t index) const = 0;
  // The label alone, without decoding.
  virtual int64_t label(int64_t index) const = 0;
  virtual int64_t num_classes() const = 0;
  virtual int64_t channels() const = 0;
  // One line for logs: "moving_fashion_mnist train: 10000 clips 1x16x28x28, 10 classes".
  virtual std::string describe() const = 0;
};

}  // namespace sparsevit::data
