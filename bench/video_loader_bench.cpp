// The video loader's clip throughput with whole-video decoding against windowed decoding (issue
// #35 item 3), on a `video_list` folder (train.csv), at TimeSformer's training settings: 8 frames
// every 8 at 30 fps, scale jitter [256, 320], 224 crop, flips (data::ClipSampling's defaults),
// training views, the model-input transform (build_video_transform, RGB).
//
// Part 1 (the loader): clips per second through data::DataLoader (--batch, shuffled) for every
// --workers count, the two variants interleaved round by round (each round one epoch over
// --clips clips, a fresh loader per run, the seed of the round) so that the shared machine's
// load hits them alike; medians over the rounds and the windowed / whole ratio.
// Part 2 (where the time goes, one thread): per clip, the frames read (whole: decode_video_file
// then the window's frames; windowed: decode_video_frames) against the rest of the sample
// (train_clip_pixels: scale, crop, flip) and the transform, summed over the same clips.
//
//   build/video_loader_bench DIR [--clips 64] [--rounds 3] [--workers 1,2] [--batch 8] [--threads 1]
//
// The loader builds each batch on one worker, so --workers 2 needs at least two batches per epoch
// (--batch 1 for a handful of long videos).
//
// bench/make_kinetics_like.sh writes a folder of Kinetics-like files (docs/video.md, "Loader
// throughput").
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "benchmarks/timing.h"
#include "data/data_loader.h"
#include "data/video_clip_dataset.h"
#include "data/video_decoder.h"
#include "data/video_list_dataset.h"
#include "data/video_sampling.h"
#include "runtime/host_info.h"

namespace {

using namespace sparsevit::data;

using sparsevit::benchmarks::median;
using sparsevit::benchmarks::seconds_since;

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Options {
  std::string dir;
  int64_t clips = 64;
  int64_t batch = 8;
  int rounds = 3;
  int threads = 1;
  std::vector<int64_t> workers = {1, 2};
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "video_loader_bench: %s\nusage: video_loader_bench DIR [--clips 64] [--rounds 3] "
               "[--workers 1,2] [--batch 8] [--threads 1]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--clips") {
      o.clips = std::stoll(value());
    } else if (a == "--batch") {
      o.batch = std::stoll(value());
    } else if (a == "--rounds") {
      o.rounds = std::stoi(value());
    } else if (a == "--threads") {
      o.threads = std::stoi(value());
    } else if (a == "--workers") {
      o.workers.clear();
      std::stringstream list(value());
      for (std::string w; std::getline(list, w, ',');) o.workers.push_back(std::stoll(w));
    } else if (!a.empty() && a[0] != '-' && o.dir.empty()) {
      o.dir = a;
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.dir.empty()) usage("no folder given");
  if (o.clips < 1 || o.batch < 1 || o.rounds < 1 || o.workers.empty()) usage("bad --clips, --batch, --rounds or --workers");
  return o;
}

// Only the first `count` samples of a dataset (the loader's epoch over them).
class FirstSamples : public Dataset {
 public:
  FirstSamples(std::shared_ptr<const Dataset> inner, int64_t count)
      : inner_(std::move(inner)), count_(std::min(count, inner_->size())) {}
  int64_t size() const override { return count_; }
  Sample get(int64_t index) const override { return inner_->get(index); }
  Sample get(int64_t index, Rng& rng) const override { return inner_->get(index, rng); }
  int64_t label(int64_t index) const override { return inner_->label(index); }
  int64_t num_classes() const override { return inner_->num_classes(); }
  int64_t channels() const override { return inner_->channels(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::shared_ptr<const Dataset> inner_;
  int64_t count_;
};

// One epoch of the loader over `clips` clips; clips per second.
double loader_rate(const std::shared_ptr<const VideoListDataset>& videos, bool windowed, int64_t clips, int64_t batch_size,
                   int64_t workers, uint64_t seed, const Transform& transform) {
  auto dataset = std::make_shared<FirstSamples>(std::make_shared<VideoClipDataset>(videos, ClipSampling{}, true, windowed),
                                                clips);
  LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = true;
  o.num_workers = workers;
  o.seed = seed;
  DataLoader loader(dataset, transform, o);
  loader.set_epoch(0);
  const auto t0 = std::chrono::steady_clock::now();
  Batch batch;
  int64_t seen = 0;
  while (loader.next(batch)) seen += batch.images.size(0);
  return static_cast<double>(seen) / seconds_since(t0);
}

struct Split {
  double read = 0, sample = 0, transform = 0;
  int64_t windowed = 0, frames_decoded_clips = 0;
};

// One thread, clip by clip: the frames read, the rest of the sample, the transform.
Split time_split(const VideoListDataset& videos, bool windowed, int64_t clips, const Transform& transform) {
  const ClipSampling s;
  Split out;
  for (int64_t i = 0; i < clips; ++i) {
    Rng rng = make_rng(1, RngStream::kSample, 0, i);
    const std::string& path = videos.entries()[static_cast<std::size_t>(i % videos.size())].path;
    auto t0 = std::chrono::steady_clock::now();
    at::Tensor frames;
    if (windowed) {
      const PickedFrames picked = decode_video_frames(path, 3, [&](int64_t t, double fps) {
        return train_clip_window(t, fps, s, rng).indices;
      });
      out.windowed += picked.windowed ? 1 : 0;
      frames = picked.frames;
    } else {
      const VideoClip clip = decode_video_file(path, 3);
      frames = select_clip_frames(clip.frames, train_clip_window(clip.frames.size(1), clip.fps, s, rng).indices);
    }
    out.read += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const at::Tensor pixels = train_clip_pixels(frames, s, rng);
    out.sample += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    Rng unused(0);
    const at::Tensor input = transform(pixels, unused);
    out.transform += seconds_since(t0);
    if (input.numel() == 0) std::abort();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  at::set_num_threads(o.threads);
  const auto videos = std::make_shared<const VideoListDataset>(o.dir, true, 3);
  const int64_t clips = std::min(o.clips, videos->size());
  const Transform transform = build_video_transform(3, video_mean_std(3));
  const sparsevit::runtime::HostInfo host = sparsevit::runtime::describe_host();
  std::printf("video_loader_bench: %s, %lld cores, at::get_num_threads %d, %s, %lld clips x %d rounds\n",
              host.cpu.c_str(), static_cast<long long>(host.cores), at::get_num_threads(),
              sparsevit::runtime::utc_now().c_str(), static_cast<long long>(clips), o.rounds);
  std::printf("videos: %s\nsampling: 8 frames every 8 at 30 fps, jitter 256-320, crop 224, flip 0.5 (train views)\n",
              videos->describe().c_str());
  std::printf("load average at start: %s\n\n", load_average().c_str());

  std::printf("part 1: loader clips/s (batch %lld, one epoch of %lld clips per run)\n", static_cast<long long>(o.batch),
              static_cast<long long>(clips));
  std::printf("%-8s %-6s %-9s %s\n", "workers", "round", "variant", "clips/s");
  for (int64_t workers : o.workers) {
    std::vector<double> whole, windowed;
    for (int r = 0; r < o.rounds; ++r) {
      const auto seed = static_cast<uint64_t>(r + 1);
      whole.push_back(loader_rate(videos, false, clips, o.batch, workers, seed, transform));
      std::printf("%-8lld %-6d %-9s %.2f\n", static_cast<long long>(workers), r, "whole", whole.back());
      windowed.push_back(loader_rate(videos, true, clips, o.batch, workers, seed, transform));
      std::printf("%-8lld %-6d %-9s %.2f\n", static_cast<long long>(workers), r, "windowed", windowed.back());
      std::fflush(stdout);
    }
    std::printf("workers %lld median: whole %.2f clips/s, windowed %.2f clips/s, windowed / whole %.2fx "
                "(load average now %s)\n\n",
                static_cast<long long>(workers), median(whole), median(windowed), median(windowed) / median(whole),
                load_average().c_str());
  }

  std::printf("part 2: one thread, seconds summed over %lld clips (share of the sample's time)\n",
              static_cast<long long>(clips));
  std::printf("%-9s %-22s %-22s %-22s %s\n", "variant", "frames read", "scale/crop/flip", "transform",
              "ms per clip");
  for (bool windowed : {false, true}) {
    const Split s = time_split(*videos, windowed, clips, transform);
    const double total = s.read + s.sample + s.transform;
    std::printf("%-9s %8.3f s (%5.1f%%)     %8.3f s (%5.1f%%)     %8.3f s (%5.1f%%)     %.1f", windowed ? "windowed" : "whole",
                s.read, 100 * s.read / total, s.sample, 100 * s.sample / total, s.transform,
                100 * s.transform / total, 1000 * total / static_cast<double>(clips));
    if (windowed) std::printf("   (%lld of %lld clips read as windows)", static_cast<long long>(s.windowed),
                              static_cast<long long>(clips));
    std::printf("\n");
  }
  std::printf("\nload average at the end: %s\n", load_average().c_str());
  return 0;
}
