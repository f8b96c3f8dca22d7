#include "pipelines/pretrain.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "data/dataset.h"
#if SPARSEVIT_WITH_POLICY
#include "pipelines/demonstration_frames.h"
#endif
#include "data/image_codec.h"
#include "data/transforms.h"
#include "models/mae_registry.h"
#include "models/masked_autoencoder.h"
#include "pipelines/checkpoint_model.h"
#include "pipelines/run_setup.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/metrics_log.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::pipelines {

nlohmann::json PretrainSummary::to_json() const {
  return {{"train_loss", train_loss},
          {"first_epoch_loss", first_epoch_loss},
          {"attention_gflops_encoder", attention_gflops_encoder},
          {"attention_gflops_decoder", attention_gflops_decoder},
          {"attention_gflops", attention_gflops_encoder + attention_gflops_decoder},
          {"encoder_tokens", encoder_tokens},
          {"decoder_tokens", decoder_tokens},
          {"params", params},
          {"epochs", epochs_run}};
}

std::string PretrainSummary::to_text() const {
  return fmt::format(
      "reconstruction loss {:.4f} (first epoch {:.4f}) | attention GFLOPs encoder {:.6f} ({} tokens) + decoder {:.6f} "
      "({} tokens) | {:.3f}M params",
      train_loss, first_epoch_loss, attention_gflops_encoder, encoder_tokens, attention_gflops_decoder, decoder_tokens,
      params / 1e6);
}

TrainConfig pretrain_defaults() {
  TrainConfig c;
  c.model = "mae_vit_nano_patch4_28";
  c.blr = 1.5e-4;      // MAE's README recipe
  c.min_lr = 0;        // main_pretrain's default
  c.weight_decay = 0.05;
  c.epochs = 10;
  c.warmup_epochs = 1;
  c.drop_path = 0;
  c.train_crop = "auto";  // images: MAE's RandomResizedCrop; demonstration frames: none (pretrain_images)
  return c;
}

namespace {

// MAE's model names; a ViT name is taken as its MAE counterpart (vit_nano_patch4_28 -> mae_vit_nano_patch4_28).
std::string mae_name(const std::string& model) { return model.rfind("mae_", 0) == 0 ? model : "mae_" + model; }

models::MaeOptions mae_options(const TrainConfig& c, const config::AttentionConfig& encoder,
                               const config::AttentionConfig& decoder) {
  models::MaeOptions o;
  o.encoder = vit_model_options(c, encoder.spec);
  if (c.decoder_embed_dim > 0) o.decoder_embed_dim = c.decoder_embed_dim;
  if (c.decoder_depth > 0) o.decoder_depth = c.decoder_depth;
  if (c.decoder_num_heads > 0) o.decoder_num_heads = c.decoder_num_heads;
  o.mask_ratio = c.mask_ratio;
  o.norm_pix_loss = c.norm_pix_loss;
  o.decoder_attention = decoder.spec;
  return o;
}

class PretrainTask : public train::TrainTask {
 public:
  explicit PretrainTask(models::MaskedAutoencoder& model) : model_(model) {}
  at::Tensor loss(const data::Batch& batch, std::mt19937_64&) override { return model_.forward(batch.images).loss; }
  void set_progress(double progress) override { model_.set_training_progress(progress); }
  double attention_gflops_now() const override {
    return model_.attention_gflops_encoder() + model_.attention_gflops_decoder();
  }

 private:
  models::MaskedAutoencoder& model_;
};

// float [C, H, W] in model units -> 8-bit pixels in [0, 1] through mean / std.
void paste(data::Image& canvas, const at::Tensor& image, int64_t top, int64_t left, int64_t scale,
           const std::vector<double>& mean, const std::vector<double>& stddev) {
  const int64_t channels = image.size(0), height = image.size(1), width = image.size(2);
  const at::Tensor img = image.to(at::kDouble).contiguous();
  const auto a = img.accessor<double, 3>();
  for (int64_t y = 0; y < height * scale; ++y)
    for (int64_t x = 0; x < width * scale; ++x)
      for (int64_t ch = 0; ch < channels; ++ch) {
        const double v = a[ch][y / scale][x / scale] * stddev[ch] + mean[ch];
        canvas.pixels[((top + y) * canvas.width + left + x) * channels + ch] =
            static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0));
      }
}

// MAE's demo: per image a row of original | masked | reconstruction | reconstruction with the
// visible patches pasted back. One PNG per image in `dir`.
std::vector<std::string> save_reconstructions(models::MaskedAutoencoder& model, const data::Dataset& images,
                                              const data::TransformConfig& tc, const std::string& dir, int64_t count,
                                              uint64_t seed) {
  torch::NoGradGuard no_grad;
  model.eval();
  const data::Transform transform = data::build_eval_transform(tc);
  data::Rng rng(seed);
  std::vector<at::Tensor> batch;
  for (int64_t i = 0; i < std::min<int64_t>(count, images.size()); ++i) batch.push_back(transform(images.get(i).image, rng));
  if (batch.empty()) return {};
  const at::Tensor x = at::stack(batch);
  const int64_t patches = model.patchify(x).size(1);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor noise = at::rand({x.size(0), patches}, gen);
  const models::MaeOutput out = model.forward(x, noise);
  at::Tensor pred = out.pred;
  if (model.config().norm_pix_loss) {  // back to pixels with each patch's own statistics
    const at::Tensor target = model.patchify(x);
    pred = pred * (target.var(-1, /*unbiased=*/true, /*keepdim=*/true) + 1e-6).sqrt() + target.mean(-1, true);
  }
  const at::Tensor recon = model.unpatchify(pred);
  const at::Tensor mask = model.unpatchify(out.mask.unsqueeze(-1).expand_as(pred));  // 1 = masked
  const at::Tensor masked = x * (1 - mask);
  const at::Tensor pasted = x * (1 - mask) + recon * mask;
  const int64_t h = x.size(2), w = x.size(3), scale = std::max<int64_t>(1, 112 / std::max(h, w)), gap = 4;
  std::vector<std::string> written;
  std::filesystem::create_directories(dir);
  for (int64_t i = 0; i < x.size(0); ++i) {
    data::Image canvas;
    canvas.channels = x.size(1);
    canvas.height = h * scale;
    canvas.width = 4 * w * scale + 3 * gap;
    canvas.pixels.assign(static_cast<std::size_t>(canvas.width * canvas.height * canvas.channels), 255);
    const at::Tensor tiles[4] = {x[i], masked[i], recon[i], pasted[i]};
    for (int t = 0; t < 4; ++t) paste(canvas, tiles[t], 0, t * (w * scale + gap), scale, tc.mean, tc.std);
    const std::string path = fmt::format("{}/recon_{:02d}.png", dir, i);
    const std::vector<uint8_t> png = data::encode_png(canvas);
    write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
    written.push_back(path);
  }
  return written;
}

}  // namespace

PretrainImages pretrain_images(const TrainConfig& c, int64_t img_size, int64_t in_chans) {
  PretrainImages p;
#if SPARSEVIT_WITH_POLICY
  const bool demonstrations =
      c.dataset == "demonstrations" || (c.dataset == "auto" && !c.data_path.empty() && is_demonstration_path(c.data_path));
#else
  if (c.dataset == "demonstrations") throw UsageError("this build has no policy layers (Box2D): no demonstration frames");
  const bool demonstrations = false;
#endif
  if (!demonstrations) {
    p.dataset = data::resolve_dataset_name(c.dataset, c.data_path);
    p.train = data::max_samples(data::make_dataset(p.dataset, c.data_path, true), c.max_train_samples);
    p.transform = data::transform_config_for(p.dataset, img_size, in_chans);
    p.transform.train_crop = c.train_crop == "auto" ? "rrc" : c.train_crop;
    p.transform.scale_min = 0.2;  // MAE: RandomResizedCrop(input_size, scale=(0.2, 1.0)) + flip, nothing else
    p.transform.color_jitter = 0;
    data::validate(p.transform);
    return p;
  }
#if SPARSEVIT_WITH_POLICY
  // A policy's camera frames (MVP / VC-1): the first --max_train_samples episodes (as `policy
  // train` counts them), the rest held out; the policy's normalisation ([0, 1] -> [-1, 1]); no
  // flip and no crop by default: the camera is fixed and the policy acts in the frame's coordinates.
  if (c.data_path.empty()) throw UsageError("--dataset demonstrations needs --data_path (a .episodes file or a .zarr folder)");
  if (in_chans != 3) throw UsageError("demonstration frames are RGB: the encoder must take 3 channels");
  const DemonstrationFrameSplits frames = demonstration_frames(c.data_path, c.max_train_samples, img_size);
  p.dataset = "demonstrations";
  p.train = frames.train;
  p.eval = frames.held_out;
  p.transform = data::transform_config_for(p.dataset, img_size, in_chans);
  p.transform.mean = {0.5, 0.5, 0.5};
  p.transform.std = {0.5, 0.5, 0.5};
  p.transform.train_crop = c.train_crop == "auto" ? "none" : c.train_crop;
  p.transform.scale_min = 0.2;
  p.transform.hflip = 0;
  p.transform.color_jitter = 0;
  p.transform.crop_pct = 1.0;
  data::validate(p.transform);
#endif
  return p;
}

std::optional<LoadedMae> load_checkpoint_mae(const train::LoadedCheckpoint& ckpt) {
  const std::optional<models::ModelDescription> described = checkpoint_description(ckpt);
  if (!described || !described->mae) return std::nullopt;
  const models::MaeDescription& m = *described->mae;
  LoadedMae loaded{m.model, models::create_mae_model(m.model, models::mae_options(m))};
  ckpt.load_model(*loaded.model);
  return loaded;
}

PretrainSummary run_pretrain(const TrainConfig& raw) {
  TrainConfig c = resolve(raw, kPretrain);
  check_device(c.device);
  train::ProcessContext process({c.threads, c.seed, c.dist_backend, c.dist_url, c.dist_timeout});
  const int64_t world = process.world_size();

  const config::AttentionConfig encoder_attention = config::load_attention_config(c.attn_cfg, c.attn_set);
  const config::AttentionConfig decoder_attention =
      c.decoder_attn_cfg.empty() ? encoder_attention : config::load_attention_config(c.decoder_attn_cfg, c.attn_set);
  std::optional<train::LoadedCheckpoint> ckpt;
  if (!c.resume.empty()) ckpt.emplace(c.resume);
  std::string name = mae_name(c.model);
  auto model = models::create_mae_model(name, mae_options(c, encoder_attention, decoder_attention));
  const models::MaeConfig& mc = model->config();

  // Data: images only (MAE pretraining uses no label).
  const PretrainImages images = pretrain_images(c, mc.encoder.img_size, mc.encoder.in_chans);
  c.dataset = images.dataset;
  if (c.data_path.empty()) c.data_path = data::default_data_path(c.dataset);
  const std::shared_ptr<const data::Dataset> train_set = images.train;
  const data::TransformConfig& tc = images.transform;
  data::LoaderOptions train_options = loader_options(c, process);
  train_options.shuffle = true;
  train_options.drop_last = true;
  data::DataLoader train_loader(train_set, data::build_train_transform(tc), train_options);
  if (train_loader.num_batches() == 0) throw UsageError("the training set has fewer samples than one batch");

  PretrainSummary summary;
  summary.rank = process.rank();
  summary.world_size = world;
  for (const auto& p : model->parameters())
    if (p.requires_grad()) summary.params += p.numel();
  summary.attention_gflops_encoder = model->attention_gflops_encoder();
  summary.attention_gflops_decoder = model->attention_gflops_decoder();
  // MAE: len_keep = int(P * (1 - mask_ratio)) visible patches + the class token.
  summary.encoder_tokens = static_cast<int64_t>(mc.encoder.num_patches() * (1 - mc.mask_ratio)) + 1;
  summary.decoder_tokens = mc.encoder.num_tokens();
  spdlog::info("MAE {} ({:.2f}M trainable params): mask ratio {}, encoder attention {} over {} visible tokens + class, "
               "decoder attention {} over {} tokens; attention GFLOPs encoder {:.5f} + decoder {:.5f}",
               name, summary.params / 1e6, mc.mask_ratio,
               encoder_attention.spec.has_mask() ? encoder_attention.spec.mask : "dense", summary.encoder_tokens - 1,
               decoder_attention.spec.has_mask() ? decoder_attention.spec.mask : "dense", summary.decoder_tokens,
               summary.attention_gflops_encoder, summary.attention_gflops_decoder);
  spdlog::info("data {}: {} training images, {} threads", c.dataset, train_set->size(), process.threads());

  train::OptimizationOptions opt = optimization_options(c, world);
  opt.betas = {0.9, 0.95};
  opt.no_weight_decay_names = {};  // MAE's add_weight_decay: biases and 1-d tensors only
  train::TrainState state(*model, opt, process, ckpt ? &*ckpt : nullptr);
  PretrainTask task(*model);
  const int64_t start_epoch = ckpt ? state.start_epoch() : c.start_epoch;

  models::ModelDescription description;
  description.mae = models::describe_mae(*model, name, {encoder_attention.yaml, c.attn_set, encoder_attention.spec},
                                         {decoder_attention.yaml, c.attn_set, decoder_attention.spec});
  nlohmann::json metadata = models::model_description_json(description);
  metadata["world_size"] = world;
  metadata["config"] = config_to_json(c, kPretrain);
  std::optional<train::MetricsLog> metrics = open_run_outputs(c, kPretrain, process);
  train::EpochHooks hooks;
  hooks.report = [](int64_t, const train::EpochStats& stats) {
    return train::EpochReport{{}, fmt::format("reconstruction loss {:.4f}  lr {:.3g}", stats.loss, stats.lr)};
  };
  const train::EpochsRun run = train::run_epochs(task, state, train_loader, process, start_epoch, epoch_checkpoints(c, std::move(metadata)),
                    metrics ? &*metrics : nullptr, hooks);
  summary.epochs_run = run.epochs;
  summary.first_epoch_loss = run.first_loss;
  summary.train_loss = run.last_loss;
  summary.checkpoint = run.checkpoint;
  if (!c.save_recon.empty() && process.main_rank()) {
    const auto eval_set = images.eval ? images.eval : data::make_dataset(c.dataset, c.data_path, false);
    const auto files = save_reconstructions(*model, *eval_set, tc, c.save_recon, 8, static_cast<uint64_t>(c.seed));
    spdlog::info("wrote {} reconstruction images to {}", files.size(), c.save_recon);
  }
  return summary;
}

}  // namespace sparsevit::pipelines
