#include "experiments/attention_map.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "analysis/raster_plot.h"
#include "data/dataset.h"
#include "data/file_bytes.h"
#include "data/image_codec.h"
#include "data/transforms.h"
#include "data/video_clip_dataset.h"
#include "data/video_decoder.h"
#include "data/video_list_dataset.h"
#include "models/timesformer.h"
#include "models/vision_transformer.h"
#include "pipelines/checkpoint_model.h"
#include "pipelines/video_data.h"
#include "runtime/cpu_threads.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

uint32_t be32(const std::vector<uint8_t>& b, std::size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | uint32_t{b[at + 3]};
}

bool is_idx_images(const std::string& path) {
  const std::vector<uint8_t> head = data::read_maybe_gzip(path);
  return head.size() >= 16 && be32(head, 0) == 2051;
}

// Image `index` of an IDX images file (magic 2051, uint8 [N, H, W]) as uint8 [1, H, W].
at::Tensor idx_image(const std::string& path, int64_t index) {
  const std::vector<uint8_t> bytes = data::read_maybe_gzip(path);
  const int64_t n = be32(bytes, 4), h = be32(bytes, 8), w = be32(bytes, 12);
  if (index < 0 || index >= n)
    throw UsageError(path + " holds " + std::to_string(n) + " images; --index " + std::to_string(index) +
                     " is out of range");
  if (static_cast<int64_t>(bytes.size()) < 16 + n * h * w) throw RuntimeError(path + ": truncated IDX file");
  return at::from_blob(const_cast<uint8_t*>(bytes.data()) + 16 + index * h * w, {1, h, w}, at::kByte).clone();
}

// The dataset an image model's input comes from, as training reads --dataset (`auto`: from
// --data_path's layout); "" when the input is --image.
std::string input_dataset(const AttentionMapConfig& c) {
  if (!c.image.empty() && !c.dataset.empty()) throw UsageError("give --image or --dataset, not both");
  return c.dataset.empty() ? "" : data::resolve_dataset_name(c.dataset, c.data_path);
}

// The input image [C, H, W] uint8: image `index` of `dataset` (input_dataset), else --image.
at::Tensor read_input(const AttentionMapConfig& c, const std::string& dataset, int64_t channels) {
  if (!dataset.empty()) {
    if (c.index < 0) throw UsageError("--dataset needs --index i (which image)");
    auto set = data::make_dataset(dataset, c.data_path, c.split == "train");  // checks --data_path
    if (c.index >= set->size())
      throw UsageError("--index " + std::to_string(c.index) + ": the split has " + std::to_string(set->size()) +
                       " images");
    return set->get(c.index).image;
  }
  if (c.image.empty()) throw UsageError("attention-map needs --image PATH or --dataset NAME --index i");
  if (!std::filesystem::exists(c.image)) throw UsageError("--image " + c.image + ": no such file");
  if (is_idx_images(c.image)) {
    if (c.index < 0) throw UsageError(c.image + " is an IDX file: give --index i");
    return idx_image(c.image, c.index);
  }
  const data::Image img = data::read_image(c.image, static_cast<int>(channels));
  return at::from_blob(const_cast<uint8_t*>(img.pixels.data()), {img.height, img.width, img.channels}, at::kByte)
      .permute({2, 0, 1})
      .clone();
}

// values [rows, cols] (any range) -> heat-coloured canvas, each cell `scale` pixels, scaled by the max.
analysis::Canvas heat_canvas(const at::Tensor& values, int64_t scale) {
  const at::Tensor v = values.to(at::kDouble).contiguous();
  const int64_t rows = v.size(0), cols = v.size(1);
  const double top = std::max(v.max().item<double>(), 1e-300);
  analysis::Canvas canvas(static_cast<int32_t>(cols * scale), static_cast<int32_t>(rows * scale));
  const double* p = v.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      uint8_t rgb[3];
      heat_color(std::max(0.0, p[r * cols + k]) / top, rgb);
      canvas.fill_rect(static_cast<int32_t>(k * scale), static_cast<int32_t>(r * scale), static_cast<int32_t>(scale),
                       static_cast<int32_t>(scale), {rgb[0], rgb[1], rgb[2]});
    }
  return canvas;
}

}  // namespace

void heat_color(double t, uint8_t rgb[3]) {
  t = std::clamp(t, 0.0, 1.0);
  // Piecewise linear through black, dark red, red, orange, yellow, white.
  static const double stops[][3] = {{0, 0, 0}, {0.5, 0, 0}, {0.9, 0.1, 0}, {1, 0.55, 0}, {1, 0.95, 0.2}, {1, 1, 1}};
  const double pos = t * 5.0;
  const int i = std::min(4, static_cast<int>(pos));
  const double f = pos - i;
  for (int ch = 0; ch < 3; ++ch)
    rgb[ch] = static_cast<uint8_t>(std::lround(255.0 * (stops[i][ch] + f * (stops[i + 1][ch] - stops[i][ch]))));
}

nlohmann::json AttentionMapSummary::to_json() const {
  nlohmann::json j = {{"layer", layer}, {"heads", heads}, {"tokens", tokens}, {"grid", grid}, {"files", files}};
  if (frame >= 0) j["frame"] = frame;
  return j;
}

namespace {

// A video model's input clip, normalised as in evaluation: [C, T, H, W].
at::Tensor read_clip(const AttentionMapConfig& c, const models::TimeSformer& model, const std::string& dataset) {
  const models::VitConfig& vc = model.config();
  if (!c.image.empty() && !c.dataset.empty()) throw UsageError("give --image or --dataset, not both");
  const int64_t channels = vc.in_chans == 1 ? 1 : 3;
  pipelines::TrainConfig flags;
  const std::string name = c.image.empty() ? data::resolve_video_dataset_name(c.dataset.empty() ? dataset : c.dataset, c.data_path) : "";
  const data::ClipSampling sampling = pipelines::clip_sampling(flags, name, vc.img_size, model.num_frames());
  data::VideoClip clip;
  if (!c.image.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(c.image, ec)) throw UsageError("--image " + c.image + ": no such file or folder");
    clip = std::filesystem::is_directory(c.image, ec) ? data::read_frame_folder(c.image, channels)
                                                      : data::decode_video_file(c.image, channels);
  } else {
    if (c.index < 0) throw UsageError("a video model's clip: --image VIDEO or --dataset NAME --index i");
    const auto videos = data::make_video_dataset(name, c.data_path, c.split == "train", channels);
    if (c.index >= videos->size())
      throw UsageError("--index " + std::to_string(c.index) + ": the split has " + std::to_string(videos->size()) + " clips");
    clip = videos->clip(c.index);
  }
  data::Rng rng(0);
  return data::build_video_transform(vc.in_chans, data::video_mean_std(vc.in_chans))(
      data::sample_test_clip(clip, sampling, 0).frames, rng);
}

}  // namespace

AttentionMapSummary run_attention_map(const AttentionMapConfig& c) {
  if (c.resume.empty()) throw UsageError("attention-map needs --resume CKPT");
  if (c.output_dir.empty()) throw UsageError("attention-map needs --output_dir DIR");
  if (c.cls_size < 1 || c.matrix_scale < 0) throw UsageError("--cls_size must be >= 1 and --matrix_scale >= 0");
  runtime::configure_cpu_threads(c.threads);

  const train::LoadedCheckpoint ckpt(c.resume);
  auto classifier = pipelines::load_checkpoint_model(ckpt);
  const models::VitConfig& vc = classifier->config();
  const int64_t L = vc.depth, H = vc.num_heads, N = vc.num_tokens(), grid = vc.img_size / vc.patch_size;
  const int64_t layer = c.layer < 0 ? L + c.layer : c.layer;
  if (layer < 0 || layer >= L)
    throw UsageError("--layer " + std::to_string(c.layer) + ": the model has " + std::to_string(L) + " layers");

  torch::NoGradGuard no_grad;
  classifier->eval();
  at::Tensor image, probs;  // the frame shown [C, H, W]; the layer's attention [H, N, N]
  AttentionMapSummary s;
  if (auto* video = dynamic_cast<models::TimeSformer*>(classifier.get())) {
    const std::optional<models::ClassifierDescription> described = pipelines::checkpoint_classifier(ckpt);
    const at::Tensor clip = read_clip(c, *video, described ? described->dataset : "");
    const std::vector<at::Tensor> inputs = video->frame_attention_inputs(clip.unsqueeze(0), c.frame);
    probs = video->spatial_attention()[static_cast<std::size_t>(layer)]->attention_probs(inputs[layer])[0];
    image = clip.select(1, c.frame);
    s.frame = c.frame;
  } else {
    auto* model = dynamic_cast<models::VisionTransformer*>(classifier.get());
    // The image through the evaluation transform of the dataset it came from.
    const std::string dataset = input_dataset(c);
    const at::Tensor raw = read_input(c, dataset, vc.in_chans);
    const std::string stats_from =
        !c.stats.empty() ? c.stats : !dataset.empty() ? dataset : (vc.in_chans == 1 ? "fashion_mnist" : "");
    data::TransformConfig tc = data::transform_config_for(stats_from, vc.img_size, vc.in_chans);
    data::validate(tc);
    data::Rng rng(0);
    image = data::build_eval_transform(tc)(raw, rng);
    const std::vector<at::Tensor> inputs = model->attention_inputs(image.unsqueeze(0));
    probs = model->blocks()[layer]->attn().attention_probs(inputs[layer])[0];
  }

  std::filesystem::create_directories(c.output_dir);
  s.layer = layer;
  s.heads = H;
  s.tokens = N;
  s.grid = grid;
  auto out = [&](const std::string& name) { return (std::filesystem::path(c.output_dir) / name).string(); };

  // The model's input, as it saw it (un-normalised to [0, 1] by its min and max).
  {
    const at::Tensor shown = image.mean(0);
    const at::Tensor lo = shown.min(), span = (shown.max() - lo).clamp_min(1e-12);
    const at::Tensor gray = ((shown - lo) / span * 255).round().to(at::kDouble).contiguous();
    const int64_t scale = std::max<int64_t>(1, c.cls_size / vc.img_size);
    analysis::Canvas canvas(static_cast<int32_t>(vc.img_size * scale), static_cast<int32_t>(vc.img_size * scale));
    const double* p = gray.data_ptr<double>();
    for (int64_t y = 0; y < vc.img_size; ++y)
      for (int64_t x = 0; x < vc.img_size; ++x) {
        const auto g = static_cast<uint8_t>(p[y * vc.img_size + x]);
        canvas.fill_rect(static_cast<int32_t>(x * scale), static_cast<int32_t>(y * scale), static_cast<int32_t>(scale),
                         static_cast<int32_t>(scale), {g, g, g});
      }
    canvas.write_png(out("input.png"));
    s.files.push_back(out("input.png"));
  }
  const int64_t cls_scale = std::max<int64_t>(1, c.cls_size / grid);
  const int64_t matrix_scale = c.matrix_scale > 0 ? c.matrix_scale : std::max<int64_t>(1, 600 / N);
  const int64_t prefix = N - grid * grid;  // the class token (1)
  for (int64_t h = 0; h < H; ++h) {
    const std::string stem = "layer" + std::to_string(layer) + "_head" + std::to_string(h);
    const at::Tensor cls_row = probs[h][0].narrow(0, prefix, grid * grid).reshape({grid, grid});
    heat_canvas(cls_row, cls_scale).write_png(out(stem + "_cls.png"));
    heat_canvas(probs[h], matrix_scale).write_png(out(stem + "_full.png"));
    s.files.push_back(out(stem + "_cls.png"));
    s.files.push_back(out(stem + "_full.png"));
  }
  return s;
}

}  // namespace sparsevit::experiments
