// A VideoDataset as model inputs (TimeSformer's Kinetics.__getitem__): each sample is a clip
// sampled by data/video_sampling.h, float32 [C, num_frames, crop, crop] in [0, 1].
//   training: one sample per video, a random window, scale jitter, crop and flip (drawn from
//             the loader's per-sample generator, so a seed gives the same clips);
//   test:     test_num_clips x test_num_crops samples per video (sample i is view i % views of
//             video i / views), deterministic; their logits are averaged per video.
// The transform that makes them model inputs is build_video_transform.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/transforms.h"
#include "data/video_dataset.h"
#include "data/video_sampling.h"
#include "data/video_window.h"

namespace sparsevit::data {

class VideoClipDataset : public Dataset {
 public:
  // windowed: when the reader can read a window (data/video_window.h, VideoListDataset does),
  // read only the frames each sample uses instead of the whole clip; the samples are the same
  // (same indices, same pixels, same draws). false reads whole clips (the loader benchmark's
  // baseline).
  VideoClipDataset(std::shared_ptr<const VideoDataset> videos, ClipSampling sampling, bool train,
                   bool windowed = true);
  int64_t size() const override { return videos_->size() * views(); }
  // Training samples drawn from a generator seeded by the index (the loader uses get(i, rng)).
  Sample get(int64_t index) const override;
  Sample get(int64_t index, Rng& rng) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return videos_->num_classes(); }
  int64_t channels() const override { return videos_->channels(); }
  std::string describe() const override;

  int64_t views() const { return train_ ? 1 : sampling_.test_num_clips * sampling_.test_num_crops; }
  const VideoDataset& videos() const { return *videos_; }
  const ClipSampling& sampling() const { return sampling_; }
  // Clips so far whose video was shorter than the sampling window (padded by repeating the last
  // frame, as TimeSformer does).
  int64_t padded_clips() const { return padded_.load(); }
  // Samples so far read from a window alone (the rest decoded their whole video).
  int64_t windowed_reads() const { return windowed_reads_.load(); }

 private:
  std::shared_ptr<const VideoDataset> videos_;
  ClipSampling sampling_;
  bool train_;
  const VideoWindowSource* window_source_ = nullptr;  // videos_ as a window reader, if it is one and windowed
  mutable std::atomic<int64_t> padded_{0};
  mutable std::atomic<int64_t> windowed_reads_{0};
};

// TimeSformer's input normalisation (DATA.MEAN 0.45, DATA.STD 0.225 per channel).
MeanStd video_mean_std(int64_t channels);

// Sampled clips [C, T, H, W] in [0, 1] -> model input: channels matched to `in_chans` (gray
// repeated, RGB to luminance), then (x - mean) / std per channel.
Transform build_video_transform(int64_t in_chans, const MeanStd& mean_std);

// ---------------------------------------------------------------- factory

// moving_fashion_mnist (the embedded default) | moving_fashion_mnist_order (its frame-order
// task) | video_list (TimeSformer's train.csv / test.csv).
const std::vector<std::string>& video_dataset_names();
// `auto`: moving_fashion_mnist without --data_path, video_list with one.
std::string resolve_video_dataset_name(const std::string& name, const std::string& path);
// The clips of `name` under `path` ("" : the default location), decoded to `channels` (1 or 3).
std::shared_ptr<const VideoDataset> make_video_dataset(const std::string& name, const std::string& path, bool train,
                                                       int64_t channels);

}  // namespace sparsevit::data
