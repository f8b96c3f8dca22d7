// The data of a video run (TimeSformer's recipe on sparsevit's loader): the clip sampling the
// flags ask for, the train and test clip sets, their transform and the test views.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/transforms.h"
#include "data/video_clip_dataset.h"
#include "data/video_sampling.h"
#include "pipelines/train_config.h"
#include "train/engine.h"

namespace sparsevit::pipelines {

// --num_frames (0: the model's), --sampling_rate (0: 2 on moving_fashion_mnist, whose 16-frame
// clips it covers, else TimeSformer's 8), --target_fps, --test_num_clips / --test_num_crops; crop
// = the model's input size; training scale jitter TimeSformer's [256, 320] scaled by input / 224
// (moving_fashion_mnist: none, its canvas is the input size). Validated.
data::ClipSampling clip_sampling(const TrainConfig& config, const std::string& dataset, int64_t input_size,
                                 int64_t num_frames);

// n videos balanced over the classes (data::take_balanced's rule); all when n <= 0 or n >= size.
std::shared_ptr<const data::VideoDataset> max_videos(std::shared_ptr<const data::VideoDataset> videos, int64_t n);

struct VideoSplits {
  std::shared_ptr<const data::VideoClipDataset> train;  // null with --eval
  std::shared_ptr<const data::VideoClipDataset> eval;
  data::Transform transform;  // the same for both: channels + TimeSformer's normalisation
  train::EvalViews views;            // the test set's clips x crops per video
};

// The clips of config.dataset (resolved) at the model's input: `in_chans` channels, frames of
// `input_size`, `num_frames` per clip. --max_train_samples / --max_eval_samples count videos.
VideoSplits video_splits(const TrainConfig& config, int64_t in_chans, int64_t input_size, int64_t num_frames,
                         bool with_train);

}  // namespace sparsevit::pipelines
