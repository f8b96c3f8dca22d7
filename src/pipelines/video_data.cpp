#include "pipelines/video_data.h"

#include <cmath>

#include "util/errors.h"

namespace sparsevit::pipelines {
namespace {

// The clips of some videos of another set, in that order.
class VideoSubset : public data::VideoDataset {
 public:
  VideoSubset(std::shared_ptr<const data::VideoDataset> base, std::vector<int64_t> indices)
      : base_(std::move(base)), indices_(std::move(indices)) {}
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  data::VideoClip clip(int64_t index) const override { return base_->clip(at(index)); }
  int64_t label(int64_t index) const override { return base_->label(at(index)); }
  int64_t num_classes() const override { return base_->num_classes(); }
  int64_t channels() const override { return base_->channels(); }
  std::string describe() const override { return std::to_string(size()) + " of " + base_->describe(); }

 private:
  int64_t at(int64_t index) const {
    if (index < 0 || index >= size()) throw RuntimeError("clip index " + std::to_string(index) + " out of range");
    return indices_[static_cast<std::size_t>(index)];
  }
  std::shared_ptr<const data::VideoDataset> base_;
  std::vector<int64_t> indices_;
};

// The labels of a video set as a Dataset, so data::take_balanced picks the videos.
class VideoLabels : public data::Dataset {
 public:
  explicit VideoLabels(const data::VideoDataset& videos) : videos_(videos) {}
  int64_t size() const override { return videos_.size(); }
  data::Sample get(int64_t index) const override { return data::Sample{at::Tensor(), label(index)}; }
  int64_t label(int64_t index) const override { return videos_.label(index); }
  int64_t num_classes() const override { return videos_.num_classes(); }
  int64_t channels() const override { return videos_.channels(); }
  std::string describe() const override { return videos_.describe(); }

 private:
  const data::VideoDataset& videos_;
};

}  // namespace

data::ClipSampling clip_sampling(const TrainConfig& c, const std::string& dataset, int64_t input_size,
                                 int64_t num_frames) {
  const bool synthetic = dataset.rfind("moving_fashion_mnist", 0) == 0;  // both tasks
  data::ClipSampling s;
  s.num_frames = num_frames;
  s.sampling_rate = c.sampling_rate > 0 ? c.sampling_rate : synthetic ? 2 : 8;
  s.target_fps = c.target_fps;
  s.crop_size = input_size;
  s.jitter_min = synthetic ? input_size : static_cast<int64_t>(std::lround(input_size * 256.0 / 224.0));
  s.jitter_max = synthetic ? input_size : static_cast<int64_t>(std::lround(input_size * 320.0 / 224.0));
  s.test_num_clips = c.test_num_clips;
  s.test_num_crops = c.test_num_crops;
  data::validate(s);
  return s;
}

std::shared_ptr<const data::VideoDataset> max_videos(std::shared_ptr<const data::VideoDataset> videos, int64_t n) {
  if (n <= 0 || n >= videos->size()) return videos;
  const auto chosen = data::take_balanced(std::make_shared<VideoLabels>(*videos), n);
  const auto* subset = dynamic_cast<const data::Subset*>(chosen.get());
  if (!subset) return videos;
  return std::make_shared<VideoSubset>(videos, subset->indices());
}

VideoSplits video_splits(const TrainConfig& c, int64_t in_chans, int64_t input_size, int64_t num_frames,
                         bool with_train) {
  const data::ClipSampling sampling = clip_sampling(c, c.dataset, input_size, num_frames);
  VideoSplits splits;
  const int64_t channels = in_chans == 1 ? 1 : 3;
  splits.eval = std::make_shared<data::VideoClipDataset>(
      max_videos(data::make_video_dataset(c.dataset, c.data_path, false, channels), c.max_eval_samples), sampling, false);
  if (with_train)
    splits.train = std::make_shared<data::VideoClipDataset>(
        max_videos(data::make_video_dataset(c.dataset, c.data_path, true, channels), c.max_train_samples), sampling, true);
  splits.transform = data::build_video_transform(in_chans, data::video_mean_std(in_chans));
  splits.views = train::EvalViews{splits.eval->views(), splits.eval->videos().size()};
  return splits;
}

}  // namespace sparsevit::pipelines
