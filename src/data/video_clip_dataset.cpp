#include "data/video_clip_dataset.h"

#include <ATen/ATen.h>

#include "data/moving_fashion_mnist.h"
#include "data/video_list_dataset.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::data {

VideoClipDataset::VideoClipDataset(std::shared_ptr<const VideoDataset> videos, ClipSampling sampling, bool train,
                                   bool windowed)
    : videos_(std::move(videos)), sampling_(sampling), train_(train) {
  if (!videos_) throw UsageError("VideoClipDataset: null video dataset");
  validate(sampling_);
  if (windowed) window_source_ = dynamic_cast<const VideoWindowSource*>(videos_.get());
}

Sample VideoClipDataset::get(int64_t index) const {
  Rng rng = make_rng(0, RngStream::kSample, 0, index);
  return get(index, rng);
}

Sample VideoClipDataset::get(int64_t index, Rng& rng) const {
  check_index(*this, index);
  const int64_t video = index / views();
  const int64_t view = index % views();
  if (window_source_ == nullptr) {
    const VideoClip clip = videos_->clip(video);
    const SampledClip sampled =
        train_ ? sample_train_clip(clip, sampling_, rng) : sample_test_clip(clip, sampling_, view);
    if (sampled.padded) padded_.fetch_add(1);
    return Sample{sampled.frames, videos_->label(video)};
  }
  // The same draws in the same order as sample_train_clip: the window start first (redrawn from
  // the same state if the reader calls the picker again with the decoded frame count), then the
  // spatial ones.
  const Rng start = rng;
  ClipWindow window;
  const FramePicker pick = [&](int64_t video_frames, double fps) {
    if (train_) {
      rng = start;
      window = train_clip_window(video_frames, fps, sampling_, rng);
    } else {
      window = test_clip_window(video_frames, fps, sampling_, view);
    }
    return window.indices;
  };
  const PickedFrames picked = window_source_->picked_frames(video, pick);
  const at::Tensor frames =
      train_ ? train_clip_pixels(picked.frames, sampling_, rng) : test_clip_pixels(picked.frames, sampling_, view);
  if (window.padded) padded_.fetch_add(1);
  if (picked.windowed) windowed_reads_.fetch_add(1);
  return Sample{frames, videos_->label(video)};
}

int64_t VideoClipDataset::label(int64_t index) const {
  check_index(*this, index);
  return videos_->label(index / views());
}

std::string VideoClipDataset::describe() const {
  std::string out = videos_->describe() + ", clips of " + std::to_string(sampling_.num_frames) + " frames every " +
                    std::to_string(sampling_.sampling_rate);
  if (!train_ && views() > 1)
    out += ", " + std::to_string(sampling_.test_num_clips) + " x " + std::to_string(sampling_.test_num_crops) + " views";
  return out;
}

MeanStd video_mean_std(int64_t channels) {
  return MeanStd{std::vector<double>(static_cast<std::size_t>(channels), 0.45),
                 std::vector<double>(static_cast<std::size_t>(channels), 0.225)};
}

Transform build_video_transform(int64_t in_chans, const MeanStd& mean_std) {
  const Normalize normalize(mean_std.mean, mean_std.std);
  return [in_chans, normalize](const at::Tensor& clip, Rng&) {
    if (clip.dim() != 4) throw RuntimeError("video transform: expected a clip [C, T, H, W], got " + c10::str(clip.sizes()));
    const int64_t t = clip.size(1), h = clip.size(2), w = clip.size(3);
    // The image transforms see the frames stacked along the height.
    const at::Tensor stacked = match_channels(to_float(clip.reshape({clip.size(0), t * h, w})), in_chans);
    return normalize(stacked).reshape({in_chans, t, h, w});
  };
}

const std::vector<std::string>& video_dataset_names() {
  static const std::vector<std::string> names = {"moving_fashion_mnist", "moving_fashion_mnist_order", "video_list"};
  return names;
}

std::string resolve_video_dataset_name(const std::string& name, const std::string& path) {
  if (name != "auto") return name;
  return path.empty() ? "moving_fashion_mnist" : "video_list";
}

std::shared_ptr<const VideoDataset> make_video_dataset(const std::string& name, const std::string& path, bool train,
                                                       int64_t channels) {
  for (const auto task : {MovingFashionMnist::Task::kWhichMoves, MovingFashionMnist::Task::kWhichMovesFirst}) {
    if (name == MovingFashionMnist::dataset_name(task))
      return std::make_shared<MovingFashionMnist>(path.empty() ? default_data_path("fashion_mnist") : path, train, 0, task);
  }
  if (name == "video_list") {
    if (path.empty()) throw UsageError("--data_path is required for dataset 'video_list' (a folder with train.csv)");
    return std::make_shared<VideoListDataset>(path, train, channels == 1 ? 1 : 3);
  }
  throw UsageError(unknown_name_message("video dataset", name, video_dataset_names()));
}

}  // namespace sparsevit::data
