#include "train/pretrain.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/image_codec.h"
#include "data/transforms.h"
#include "models/mae_registry.h"
#include "models/masked_autoencoder.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/metrics_log.h"
#include "train/run_setup.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::train {

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
  c.train_crop = "rrc";
  return c;
}

namespace {

// MAE's model names; a ViT name is taken as its MAE counterpart (vit_nano_patch4_28 -> mae_vit_nano_patch4_28).
std::string mae_name(const std::string& model) { return model.rfind("mae_", 0) == 0 ? model : "mae_" + model; }

// Where a pretrain checkpoint describes its model.
constexpr const char* kMaeKey = "mae";

models::MaeOptions mae_options(const TrainConfig& c, const AttentionConfig& encoder, const AttentionConfig& decoder) {
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

class PretrainTask : public TrainTask {
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

std::optional<LoadedMae> load_checkpoint_mae(const LoadedCheckpoint& ckpt) {
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json(), nullptr, false);
  if (!meta.is_object() || !meta.contains(kMaeKey)) return std::nullopt;
  try {
    TrainConfig c = pretrain_defaults();
    const nlohmann::json& m = meta.at(kMaeKey);
    c.model = m.at("model").get<std::string>();
    c.input_size = m.at("img_size").get<int64_t>();
    c.patch_size = m.at("patch_size").get<int64_t>();
    c.embed_dim = m.at("embed_dim").get<int64_t>();
    c.depth = m.at("depth").get<int64_t>();
    c.num_heads = m.at("num_heads").get<int64_t>();
    c.decoder_embed_dim = m.at("decoder_embed_dim").get<int64_t>();
    c.decoder_depth = m.at("decoder_depth").get<int64_t>();
    c.decoder_num_heads = m.at("decoder_num_heads").get<int64_t>();
    c.mask_ratio = m.at("mask_ratio").get<double>();
    c.norm_pix_loss = m.at("norm_pix_loss").get<bool>();
    const auto overrides = m.at("attention_overrides").get<std::vector<std::string>>();
    AttentionConfig encoder{m.at("attention_yaml").get<std::string>(), {}};
    encoder.spec = config::parse_attention_spec(encoder.yaml, ckpt.path() + " (attention)");
    config::apply_mask_kwarg_overrides(encoder.spec, overrides);
    AttentionConfig decoder{m.at("decoder_attention_yaml").get<std::string>(), {}};
    decoder.spec = config::parse_attention_spec(decoder.yaml, ckpt.path() + " (decoder attention)");
    config::apply_mask_kwarg_overrides(decoder.spec, overrides);
    LoadedMae loaded{c.model, models::create_mae_model(c.model, mae_options(c, encoder, decoder))};
    ckpt.load_model(*loaded.model);
    return loaded;
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(ckpt.path() + ": corrupt MAE model description: " + e.what());
  }
}

PretrainSummary run_pretrain(const TrainConfig& raw) {
  TrainConfig c = resolve(raw, kPretrain);
  check_device(c.device);
  ProcessContext process({c.threads, c.seed, c.dist_backend, c.dist_url, c.dist_timeout});
  const int64_t world = process.world_size();

  AttentionConfig encoder_attention = load_attention_config(c.attn_cfg, c.attn_set);
  AttentionConfig decoder_attention =
      c.decoder_attn_cfg.empty() ? encoder_attention : load_attention_config(c.decoder_attn_cfg, c.attn_set);
  std::optional<LoadedCheckpoint> ckpt;
  if (!c.resume.empty()) ckpt.emplace(c.resume);
  std::string name = mae_name(c.model);
  auto model = models::create_mae_model(name, mae_options(c, encoder_attention, decoder_attention));
  const models::MaeConfig& mc = model->config();

  // Data: images only (MAE pretraining uses no label).
  c.dataset = data::resolve_dataset_name(c.dataset, c.data_path);
  if (c.data_path.empty()) c.data_path = data::default_data_path(c.dataset);
  auto train_set = data::max_samples(data::make_dataset(c.dataset, c.data_path, true), c.max_train_samples);
  data::TransformConfig tc = data::transform_config_for(c.dataset, mc.encoder.img_size, mc.encoder.in_chans);
  tc.train_crop = c.train_crop == "auto" ? "rrc" : c.train_crop;
  tc.scale_min = 0.2;  // MAE: RandomResizedCrop(input_size, scale=(0.2, 1.0)) + flip, nothing else
  tc.color_jitter = 0;
  data::validate(tc);
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

  OptimizationOptions opt = optimization_options(c, world);
  opt.betas = {0.9, 0.95};
  opt.no_weight_decay_names = {};  // MAE's add_weight_decay: biases and 1-d tensors only
  TrainState state(*model, opt, process, ckpt ? &*ckpt : nullptr);
  PretrainTask task(*model);
  const int64_t start_epoch = ckpt ? state.start_epoch() : c.start_epoch;

  const nlohmann::json metadata = {
      {kMaeKey,
       {{"model", name}, {"img_size", mc.encoder.img_size}, {"patch_size", mc.encoder.patch_size},
        {"embed_dim", mc.encoder.embed_dim}, {"depth", mc.encoder.depth}, {"num_heads", mc.encoder.num_heads},
        {"decoder_embed_dim", mc.decoder_embed_dim},
        {"decoder_depth", mc.decoder_depth}, {"decoder_num_heads", mc.decoder_num_heads}, {"mask_ratio", mc.mask_ratio},
        {"norm_pix_loss", mc.norm_pix_loss}, {"attention_yaml", encoder_attention.yaml},
        {"decoder_attention_yaml", decoder_attention.yaml}, {"attention_overrides", c.attn_set}}},
      {"world_size", world},
      {"config", config_to_json(c, kPretrain)}};
  std::optional<MetricsLog> metrics = open_run_outputs(c, kPretrain, process);
  for (int64_t epoch = start_epoch; epoch < c.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    const EpochStats train = train_one_epoch(task, state, train_loader, epoch, process);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json record = {{"epoch", epoch},
                             {"train_loss", train.loss},
                             {"lr", train.lr},
                             {"epoch_seconds", seconds},
                             {"train_images_per_second", train.train_seconds > 0 ? train.images / train.train_seconds : 0.0},
                             {"attention_gflops", train.attention_gflops}};
    process.out() << fmt::format("Epoch {}/{}: reconstruction loss {:.4f}  lr {:.3g}  ({:.1f} s)", epoch + 1, c.epochs,
                                 train.loss, train.lr, seconds)
                  << std::endl;
    if (metrics) metrics->append(record);
    const std::string written = save_epoch_checkpoints(state, c, epoch, metadata, process);
    if (!written.empty()) summary.checkpoint = written;
    if (summary.epochs_run == 0) summary.first_epoch_loss = train.loss;
    summary.train_loss = train.loss;
    summary.epochs_run++;
  }
  if (!c.save_recon.empty() && process.main_rank()) {
    const auto eval_set = data::make_dataset(c.dataset, c.data_path, false);
    const auto files = save_reconstructions(*model, *eval_set, tc, c.save_recon, 8, static_cast<uint64_t>(c.seed));
    spdlog::info("wrote {} reconstruction images to {}", files.size(), c.save_recon);
  }
  return summary;
}

}  // namespace sparsevit::train
