#include "inference/predict.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/image_codec.h"
#include "data/transforms.h"
#include "data/video_clip_dataset.h"
#include "data/video_decoder.h"
#include "data/video_list_dataset.h"
#include "data/video_sampling.h"
#include "models/model_registry.h"
#include "models/pretrained_weights.h"
#include "pipelines/checkpoint_model.h"
#include "pipelines/run_setup.h"
#include "pipelines/video_data.h"
#include "runtime/cpu_threads.h"
#include "train/checkpoint.h"
#include "util/errors.h"
#include "util/npy_file.h"
#include "weights/weight_file.h"

namespace sparsevit::inference {
namespace fs = std::filesystem;
namespace {

const at::Tensor* find(const weights::NamedTensors& weights, const std::string& name) {
  for (const auto& [n, t] : weights)
    if (n == name) return &t;
  return nullptr;
}

// Fills the shape flags left at 0 from the weights (timm layout): classes from head.weight,
// width / patch / channels from patch_embed.proj.weight, input size from pos_embed, depth from
// the highest block index, global pooling from fc_norm without norm. Heads cannot be read off.
models::ModelOptions options_from_weights(const weights::NamedTensors& file_weights, pipelines::TrainConfig c,
                                          const config::AttentionSpec& spec) {
  const weights::NamedTensors weights = models::without_wrapper_prefixes(file_weights);
  // Video models: frames from time_embed [1, T, C]; without temporal attention the weights are
  // joint_space_time (time_embed) or space_only (none).
  const at::Tensor* time_embed = find(weights, "time_embed");
  if (time_embed && time_embed->dim() == 3 && c.num_frames == 0) c.num_frames = time_embed->size(1);
  if (models::find_model_shape(c.model).is_video() && c.attention_type == "divided_space_time" &&
      !find(weights, "blocks.0.temporal_attn.qkv.weight"))
    c.attention_type = time_embed ? "joint_space_time" : "space_only";
  if (const at::Tensor* head = find(weights, "head.weight"); head && c.nb_classes == 0 && head->dim() == 2)
    c.nb_classes = head->size(0);
  const at::Tensor* proj = find(weights, "patch_embed.proj.weight");
  if (proj && proj->dim() == 4) {
    if (c.embed_dim == 0) c.embed_dim = proj->size(0);
    if (c.patch_size == 0) c.patch_size = proj->size(2);
  }
  const at::Tensor* pos = find(weights, "pos_embed");
  if (pos && pos->dim() == 3 && c.input_size == 0 && proj && proj->dim() == 4) {
    const auto grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(pos->size(1) - 1))));
    if (grid * grid == pos->size(1) - 1) c.input_size = grid * proj->size(2);
  }
  if (c.depth == 0) {
    int64_t depth = 0;
    for (const auto& [name, t] : weights)
      if (name.rfind("blocks.", 0) == 0) depth = std::max<int64_t>(depth, std::atoll(name.c_str() + 7) + 1);
    if (depth > 0) c.depth = depth;
  }
  if (!c.global_pool && find(weights, "fc_norm.weight") && !find(weights, "norm.weight")) c.global_pool = true;
  // The early-convolution stem (timm's HybridEmbed + ConvStem names): its first conv gives the
  // channels in, its last the width; the flags give the patch size (the stem's stride).
  const at::Tensor* stem_in = find(weights, "patch_embed.backbone.0.conv.weight");
  if (stem_in && stem_in->dim() == 4) c.stem = "conv";
  models::ModelOptions o = pipelines::vit_model_options(c, spec);
  if (stem_in && stem_in->dim() == 4) o.in_chans = stem_in->size(1);
  if (proj && proj->dim() == 4) o.in_chans = proj->size(1);
  return o;
}

struct LoadedModel {
  std::shared_ptr<models::Classifier> model;
  std::string dataset;  // normalisation of image inputs
};

LoadedModel load_model(const PredictOptions& p) {
  if (p.resume.empty() == p.weights.empty()) throw UsageError("predict needs exactly one of --resume CKPT or --weights FILE");
  if (!p.resume.empty()) {
    const train::LoadedCheckpoint ckpt(p.resume);
    const std::optional<models::ClassifierDescription> m = pipelines::checkpoint_classifier(ckpt);
    if (!m) throw RuntimeError(p.resume + " does not say which model it holds; use --weights with --model");
    auto model = models::create_classifier(m->model, models::model_options(*m));
    ckpt.load_model(*model);
    return {model, m->dataset.empty() ? p.model.dataset : m->dataset};
  }
  const weights::NamedTensors weights = weights::read_weight_file(p.weights);
  // Published weights run as published (dense) unless an attention config is given.
  config::AttentionConfig attention;
  if (!p.model.attn_cfg.empty()) attention = config::load_attention_config(p.model.attn_cfg, p.model.attn_set);
  config::AttentionConfig temporal;
  if (!p.model.temporal_attn_cfg.empty()) temporal = config::load_attention_config(p.model.temporal_attn_cfg, {});
  models::ModelOptions options = options_from_weights(weights, p.model, attention.spec);
  options.temporal_attention = temporal.spec;
  auto model = models::create_classifier(p.model.model, options);
  const models::PretrainedLoad load = models::load_pretrained(*model, weights, p.weights);
  if (!load.missing.empty() || !load.removed.empty())
    throw UsageError(p.weights + ": the weights do not fill the model (" + models::describe(load) +
                     "); check --model and the shape flags");
  if (!load.unexpected.empty()) spdlog::warn("{}: {}", p.weights, models::describe(load));
  return {model, p.model.dataset};
}

bool is_image_file(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// What the model runs on: [B * views, ...] and a name per input; the logits of an input are the
// mean over its `views` rows (a video's test views).
struct ModelInput {
  at::Tensor tensor;
  std::vector<std::string> names;
  int64_t views = 1;
};

// A float32 .npy used as is (no preprocessing, so independent implementations can be compared
// exactly): [B, C, H, W] for image models, [B, C, T, H, W] (TimeSformer's layout) for video.
ModelInput read_npy_input(const std::string& input, const models::Classifier& model) {
  const NpyFloat32 array = read_npy_float32(input, "predict");
  const std::vector<int64_t> expected = model.input_shape();
  if (array.shape.size() != expected.size() + 1 ||
      std::vector<int64_t>(array.shape.begin() + 1, array.shape.end()) != expected)
    throw UsageError(fmt::format("--input {}: shape [{}] is not [B, {}] as the model takes", input,
                                 fmt::join(array.shape, ", "), fmt::join(expected, ", ")));
  ModelInput out;
  for (int64_t i = 0; i < array.shape[0]; ++i) out.names.push_back(fmt::format("{}[{}]", fs::path(input).filename().string(), i));
  out.tensor = at::from_blob(const_cast<float*>(array.values.data()), array.shape, at::kFloat).clone();
  return out;
}

// A video file or a folder of frames: one clip, its test views (--test_num_clips x
// --test_num_crops, TimeSformer's sampling) normalised as in training.
ModelInput read_video_input(const std::string& input, const models::Classifier& model, const pipelines::TrainConfig& c,
                            const std::string& dataset) {
  const models::VitConfig& vc = model.config();
  std::error_code ec;
  const int64_t channels = vc.in_chans == 1 ? 1 : 3;
  const data::VideoClip clip = fs::is_directory(input, ec) ? data::read_frame_folder(input, channels)
                                                           : data::decode_video_file(input, channels);
  const data::ClipSampling sampling = pipelines::clip_sampling(c, dataset, vc.img_size, model.num_frames());
  const data::Transform transform = data::build_video_transform(vc.in_chans, data::video_mean_std(vc.in_chans));
  ModelInput out;
  out.views = sampling.test_num_clips * sampling.test_num_crops;
  std::vector<at::Tensor> views;
  data::Rng rng(0);
  for (int64_t v = 0; v < out.views; ++v) views.push_back(transform(data::sample_test_clip(clip, sampling, v).frames, rng));
  out.tensor = at::stack(views);
  out.names.push_back(fs::path(input).filename().string());
  return out;
}

// Images, an image folder, or (video models) a video file or frame folder.
ModelInput read_input(const std::string& input, const models::Classifier& model, const pipelines::TrainConfig& c,
                      const std::string& dataset) {
  std::error_code ec;
  if (!fs::exists(input, ec)) throw UsageError("--input '" + input + "' does not exist");
  if (fs::is_regular_file(input, ec) && fs::path(input).extension() == ".npy") return read_npy_input(input, model);
  if (model.num_frames() > 0) return read_video_input(input, model, c, dataset);
  const models::VitConfig& vc = model.config();
  ModelInput out;
  std::vector<fs::path> files;
  if (fs::is_directory(input, ec)) {
    for (const auto& entry : fs::recursive_directory_iterator(input))
      if (entry.is_regular_file() && is_image_file(entry.path())) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw UsageError("--input " + input + ": no .png/.jpg/.jpeg images in the folder");
  } else {
    files.push_back(input);
  }
  data::TransformConfig tc = data::transform_config_for(dataset, vc.img_size, vc.in_chans);
  const data::Transform transform = data::build_eval_transform(tc);
  std::vector<at::Tensor> images;
  data::Rng rng(0);
  for (const auto& file : files) {
    const data::Image image = data::read_image(file.string(), vc.in_chans == 1 ? 1 : 3);
    const at::Tensor chw = at::from_blob(const_cast<uint8_t*>(image.pixels.data()),
                                         {image.height, image.width, image.channels}, at::kByte)
                               .permute({2, 0, 1})
                               .clone();
    images.push_back(transform(chw, rng));
    out.names.push_back(fs::relative(file, fs::is_directory(input, ec) ? fs::path(input) : file.parent_path()).string());
  }
  out.tensor = at::stack(images);
  return out;
}

}  // namespace

Predictions run_predict(const PredictOptions& p) {
  const pipelines::TrainConfig config = pipelines::resolve(p.model);
  pipelines::check_device(config.device);
  runtime::configure_cpu_threads(config.threads);
  if (p.topk < 1) throw UsageError("--topk must be >= 1");
  LoadedModel loaded = load_model(p);
  auto& model = *loaded.model;
  model.eval();
  model.set_training_progress(1.0);
  const ModelInput input = read_input(p.input, model, config, loaded.dataset);
  const at::Tensor& x = input.tensor;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> logits;
  for (int64_t start = 0; start < x.size(0); start += config.batch_size)
    logits.push_back(model.forward(x.narrow(0, start, std::min(config.batch_size, x.size(0) - start))));
  at::Tensor all = at::cat(logits);
  // A video's logits: the mean over its test views.
  if (input.views > 1) all = all.view({-1, input.views, all.size(1)}).mean(1);
  Predictions out{input.names, all.contiguous()};
  if (!p.output.empty()) {
    const at::Tensor l = out.logits.to(at::kFloat).contiguous();
    write_npy_float32(p.output, {l.size(0), l.size(1)}, std::vector<float>(l.data_ptr<float>(), l.data_ptr<float>() + l.numel()));
  }
  return out;
}

std::string format_topk(const Predictions& predictions, int64_t k) {
  const at::Tensor probs = at::softmax(predictions.logits.to(at::kDouble), 1);
  const auto [values, indices] = probs.topk(std::min<int64_t>(k, probs.size(1)), 1);
  std::string out;
  for (int64_t i = 0; i < probs.size(0); ++i) {
    out += predictions.names[static_cast<std::size_t>(i)] + ":";
    for (int64_t j = 0; j < values.size(1); ++j)
      out += fmt::format("  {} ({:.3f})", indices[i][j].item<int64_t>(), values[i][j].item<double>());
    out += "\n";
  }
  return out;
}

}  // namespace sparsevit::inference
