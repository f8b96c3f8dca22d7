#include "pipelines/finetune.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/attention_report.h"
#include "analysis/video_attention_report.h"
#include "config/attention_spec.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/model_registry.h"
#include "models/pretrained_weights.h"
#include "models/timesformer.h"
#include "pipelines/checkpoint_model.h"
#include "pipelines/run_setup.h"
#include "pipelines/video_data.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/losses.h"
#include "train/metrics_log.h"
#include "train/mixup.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::pipelines {

nlohmann::json TrainSummary::to_json() const {
  nlohmann::json j = {{"test_acc1", test_acc1},
                      {"test_acc5", test_acc5},
                      {"test_loss", test_loss},
                      {"attention_gflops", attention_gflops},
                      {"attention_gflops_paid", attention_gflops_paid},
                      {"attention_gflops_patch", attention_gflops_patch},
                      {"pruning_ratio", pruning_ratio},
                      {"density", density},
                      {"params", params},
                      {"epochs", epochs_run},
                      {"train_samples", train_samples},
                      {"eval_samples", eval_samples}};
  if (ema_acc1 >= 0) j["ema_acc1"] = ema_acc1;
  if (video) {
    j["spatial_gflops"] = spatial_gflops;
    j["temporal_gflops"] = temporal_gflops;
    j["padded_clips"] = padded_clips;
  }
  return j;
}

std::string TrainSummary::to_text() const {
  const bool scheduled = std::abs(attention_gflops_paid - attention_gflops) > 1e-9 * std::max(1.0, attention_gflops);
  return fmt::format(
      "top-1 accuracy {:.2f}%{} | attention GFLOPs {:.6f} (patch pairs only {:.6f}){} | pruning ratio {:.4f} | "
      "density {:.4f} | {:.3f}M params",
      test_acc1, ema_acc1 >= 0 ? fmt::format(" (EMA {:.2f}%)", ema_acc1) : std::string(), attention_gflops,
      attention_gflops_patch, scheduled ? fmt::format(", {:.6f} paid on average during training", attention_gflops_paid) : "",
      pruning_ratio, density, params / 1e6) +
         (video ? fmt::format(" | spatial {:.6f} + temporal {:.6f} GFLOPs per clip | {} padded clips", spatial_gflops,
                              temporal_gflops, padded_clips)
                : std::string());
}

namespace {

// The model and attention a checkpoint was trained with override the flags, so that
// `sparsevit eval --resume ckpt` rebuilds exactly that model.
void adopt_checkpoint_model(TrainConfig& c, config::AttentionConfig& attention, config::AttentionConfig& temporal,
                            const train::LoadedCheckpoint& ckpt) {
  const std::optional<models::ModelDescription> described = checkpoint_description(ckpt);
  if (!described || !described->classifier) return;
  const models::ClassifierDescription& m = *described->classifier;
  if (m.model != c.model) spdlog::info("using the checkpoint's model {} (not {})", m.model, c.model);
  c.model = m.model;
  if (m.nb_classes > 0) c.nb_classes = m.nb_classes;
  if (m.shape) {
    c.input_size = m.shape->img_size;
    c.patch_size = m.shape->patch_size;
    c.embed_dim = m.shape->embed_dim;
    c.depth = m.shape->depth;
    c.num_heads = m.shape->num_heads;
    c.global_pool = m.shape->global_pool;
    c.stem = m.shape->stem;
    c.num_frames = m.num_frames;
    c.attention_type = m.attention_type;
  }
  temporal = {m.temporal_attention.yaml, m.temporal_attention.spec};
  attention = {m.attention.yaml, m.attention.spec};
  c.attn_set = m.attention.overrides;
}

// Supervised classification: soft-target cross-entropy under Mixup/CutMix, label smoothing, or
// plain cross-entropy (MAE's main_finetune criterion choice).
class ClassificationTask : public train::TrainTask {
 public:
  ClassificationTask(models::Classifier& model, train::Mixup& mixup, double smoothing)
      : model_(model), mixup_(mixup), smoothing_(smoothing) {}

  at::Tensor loss(const data::Batch& batch, std::mt19937_64& host_rng) override {
    if (mixup_.enabled()) {
      auto [images, targets] = mixup_.apply(batch.images, batch.labels, host_rng);
      return train::soft_target_cross_entropy(logits(images), targets);
    }
    if (smoothing_ > 0) return train::label_smoothing_cross_entropy(logits(batch.images), batch.labels, smoothing_);
    return at::cross_entropy_loss(logits(batch.images), batch.labels);
  }
  void set_progress(double progress) override { model_.set_training_progress(progress); }
  double attention_gflops_now() const override { return model_.attention_gflops_now(); }

 private:
  // float32 logits for the loss also under bfloat16 autocast (--amp bf16).
  at::Tensor logits(const at::Tensor& images) { return model_.forward(images).to(at::kFloat); }

  models::Classifier& model_;
  train::Mixup& mixup_;
  double smoothing_;
};

}  // namespace

TrainSummary run_finetune(const TrainConfig& raw) {
  TrainConfig c = resolve(raw);
  check_device(c.device);
  train::ProcessContext process({c.threads, c.seed, c.dist_backend, c.dist_url, c.dist_timeout});
  const int64_t rank = process.rank(), world = process.world_size();
  if (world > 1) spdlog::info("data parallel: {} per-process batch = {} global", c.batch_size, c.batch_size * world);

  // Attention: the YAML text travels in the checkpoint so a run can be rebuilt exactly.
  config::AttentionConfig attention = config::load_attention_config(c.attn_cfg, c.attn_set);
  // The temporal attention of a video model (divided space-time): dense unless --temporal_attn_cfg.
  config::AttentionConfig temporal;
  if (!c.temporal_attn_cfg.empty()) temporal = config::load_attention_config(c.temporal_attn_cfg);
  std::optional<train::LoadedCheckpoint> ckpt;
  if (!c.resume.empty()) {
    ckpt.emplace(c.resume);
    adopt_checkpoint_model(c, attention, temporal, *ckpt);
  }
  const config::AttentionSpec& spec = attention.spec;
  const models::ModelShape& shape = models::find_model_shape(c.model);
  const bool video = shape.is_video();

  // Data: images through the timm/DeiT transforms, or video clips sampled as TimeSformer does.
  std::shared_ptr<const data::Dataset> train_set, eval_set;
  data::Transform train_transform, eval_transform;
  train::EvalViews views;
  std::shared_ptr<const data::VideoClipDataset> video_train, video_eval;
  if (video) {
    c.dataset = data::resolve_video_dataset_name(c.dataset, c.data_path);
    const models::ModelOptions options = vit_model_options(c, spec);
    const models::VitConfig frame = models::vit_config(shape, options);
    const VideoSplits splits =
        video_splits(c, frame.in_chans, frame.img_size, models::num_frames(shape, options), !c.eval);
    video_train = splits.train;
    video_eval = splits.eval;
    train_set = splits.train;
    eval_set = splits.eval;
    train_transform = eval_transform = splits.transform;
    views = splits.views;
  } else {
    c.dataset = data::resolve_dataset_name(c.dataset, c.data_path);
    c.data_path = data::resolve_data_path(c.dataset, c.data_path);
    eval_set = data::max_samples(data::make_dataset(c.dataset, c.data_path, false), c.max_eval_samples);
    if (!c.eval) train_set = data::max_samples(data::make_dataset(c.dataset, c.data_path, true), c.max_train_samples);
  }
  if (c.nb_classes <= 0) c.nb_classes = eval_set->num_classes();
  if (c.nb_classes < eval_set->num_classes())
    throw UsageError("--nb_classes " + std::to_string(c.nb_classes) + " is smaller than the dataset's " +
                     std::to_string(eval_set->num_classes()) + " classes");

  // Model.
  auto model = models::create_classifier(c.model, vit_model_options(c, spec, temporal.spec));
  const models::VitConfig& vc = model->config();
  if (!video) {
    const data::TransformConfig tc = transform_config(c, vc.img_size, vc.in_chans);
    train_transform = data::build_train_transform(tc);
    eval_transform = data::build_eval_transform(tc);
  }

  data::LoaderOptions eval_options = loader_options(c, process);
  eval_options.even_shards = false;  // every test sample exactly once over the ranks
  data::DataLoader eval_loader(eval_set, eval_transform, eval_options);

  // Attention cost of this model, from the patterns its kernels run (at the end of any schedule).
  TrainSummary summary;
  summary.train_samples = train_set ? train_set->size() : 0;
  summary.eval_samples = eval_set->size();
  if (const auto* timesformer = dynamic_cast<const models::TimeSformer*>(model.get())) {
    const analysis::VideoAttentionReport report = analysis::video_attention_report(
        spec, temporal.spec, timesformer->video_config().layout(), model->layer_patterns(),
        timesformer->temporal_layer_patterns());
    summary.video = true;
    summary.spatial_gflops = report.spatial_gflops;
    summary.temporal_gflops = report.temporal_gflops;
    summary.attention_gflops = report.attention_gflops;
    summary.attention_gflops_patch = report.attention_gflops_patch;
    summary.pruning_ratio = report.pruning_ratio;
    summary.density = report.density;
  } else {
    const analysis::AttentionReport report =
        analysis::attention_report(spec, vc.attention_geometry(), model->layer_patterns());
    summary.attention_gflops = report.attention_gflops;
    summary.attention_gflops_patch = report.attention_gflops_patch;
    summary.pruning_ratio = report.pruning_ratio;
    summary.density = report.density;
  }
  summary.attention_gflops_paid = summary.attention_gflops;
  summary.rank = rank;
  summary.world_size = world;
  for (const auto& p : model->parameters()) summary.params += p.numel();
  spdlog::info("model {} ({:.2f}M params, {} tokens{}, attention {} kernel {}): pruning ratio {:.4f}, attention GFLOPs {:.4f}",
               c.model, summary.params / 1e6, vc.num_tokens(),
               video ? fmt::format(" x {} frames ({})", model->num_frames(), c.attention_type) : std::string(), spec.has_mask() ? spec.mask : "dense",
               model->kernel_name(), summary.pruning_ratio, summary.attention_gflops);
  spdlog::info("data {}: {} train / {} eval samples, {} classes, {} threads", c.dataset,
               train_set ? train_set->size() : 0, eval_set->size(), c.nb_classes, process.threads());
  auto forward = [&model](const at::Tensor& images) { return model->forward(images); };

  if (c.eval) {
    ckpt->load_model(*model);
    model->set_training_progress(1.0);
    const train::ClassifierMetrics r = train::evaluate_classifier(*model, forward, c.nb_classes, eval_loader, 0, process, views);
    summary.test_acc1 = r.acc1;
    summary.test_acc5 = r.acc5;
    summary.test_loss = r.loss;
    if (video_eval) summary.padded_clips = video_eval->padded_clips();
    return summary;
  }

  // Optimisation. MAE: eff_batch_size = batch_size * accum_iter * world_size; lr = blr * eff_batch_size / 256.
  train::OptimizationOptions opt = optimization_options(c, world);
  opt.layer_decay = c.layer_decay;
  opt.num_layers = vc.depth + 1;
  opt.model_ema = c.model_ema;
  opt.model_ema_decay = c.model_ema_decay;
  train::MixupConfig mixup_config;
  mixup_config.mixup_alpha = c.mixup;
  mixup_config.cutmix_alpha = c.cutmix;
  mixup_config.prob = c.mixup_prob;
  mixup_config.switch_prob = c.mixup_switch_prob;
  mixup_config.label_smoothing = c.smoothing;
  mixup_config.num_classes = c.nb_classes;
  train::Mixup mixup(mixup_config);

  data::LoaderOptions train_options = loader_options(c, process);
  train_options.shuffle = true;
  // Mixup pairs the batch with its reverse: full batches only (MAE's drop_last), unless the
  // training set is smaller than one global batch (a tiny folder), which then trains as one batch.
  const bool one_batch_or_more = train_set->size() >= c.batch_size * world;
  train_options.drop_last = mixup.enabled() && one_batch_or_more;
  if (mixup.enabled() && !one_batch_or_more)
    spdlog::warn("the training set ({} images) is smaller than one batch ({}): one partial batch per epoch",
                 train_set->size(), c.batch_size * world);
  data::DataLoader train_loader(train_set, train_transform, train_options);
  if (train_loader.num_batches() == 0) throw UsageError("the training set has fewer samples than one batch");

  if (!c.finetune.empty() && !ckpt) {
    // MAE main_finetune --finetune: pretrained weights, then training as usual (rank 0's are broadcast).
    const models::PretrainedLoad load = models::load_pretrained_file(*model, c.finetune);
    spdlog::info("--finetune {}: {}", c.finetune, models::describe(load));
  }
  train::TrainState state(*model, opt, process, ckpt ? &*ckpt : nullptr);
  ClassificationTask task(*model, mixup, c.smoothing);
  const int64_t start_epoch = ckpt ? state.start_epoch() : c.start_epoch;

  models::ModelDescription description;
  description.classifier = models::describe_classifier(*model, c.model, {attention.yaml, c.attn_set, spec},
                                                       {temporal.yaml, {}, temporal.spec}, c.dataset);
  nlohmann::json metadata = models::model_description_json(description);
  metadata["world_size"] = world;
  metadata["config"] = config_to_json(c);
  std::optional<train::MetricsLog> metrics = open_run_outputs(c, kFinetune, process);
  if (!c.output_dir.empty() && process.main_rank()) write_file_atomically(c.output_dir + "/attention.yaml", attention.yaml);

  train::ClassifierMetrics last;
  train::EpochHooks hooks;
  hooks.report = [&](int64_t epoch, const train::EpochStats& stats) {
    last = train::evaluate_classifier(*model, forward, c.nb_classes, eval_loader, epoch, process, views);
    train::EpochReport report;
    report.fields = {{"test_loss", last.loss}, {"test_acc1", last.acc1}, {"test_acc5", last.acc5}};
    if (world > 1) report.fields["world_size"] = world;
    std::string ema_text;
    if (train::ModelEma* ema = state.ema()) {
      train::EmaWeightsScope scope(*ema, *model);
      summary.ema_acc1 =
          train::evaluate_classifier(*model, forward, c.nb_classes, eval_loader, epoch, process, views).acc1;
      report.fields["test_acc1_ema"] = summary.ema_acc1;
      ema_text = fmt::format("  ema acc@1 {:.2f}", summary.ema_acc1);
    }
    report.text = fmt::format("train loss {:.4f}  test loss {:.4f}  acc@1 {:.2f}  acc@5 {:.2f}{}", stats.loss, last.loss,
                              last.acc1, last.acc5, ema_text);
    return report;
  };
  summary.epochs_run = train::run_epochs(task, state, train_loader, process, start_epoch,
                                         epoch_checkpoints(c, std::move(metadata)), metrics ? &*metrics : nullptr, hooks)
                           .epochs;
  if (summary.epochs_run == 0) {
    model->set_training_progress(1.0);
    last = train::evaluate_classifier(*model, forward, c.nb_classes, eval_loader, start_epoch, process, views);
  }
  if (state.attention_gflops_paid() > 0) summary.attention_gflops_paid = state.attention_gflops_paid();
  summary.test_acc1 = last.acc1;
  summary.test_acc5 = last.acc5;
  summary.test_loss = last.loss;
  if (video_eval) summary.padded_clips = video_eval->padded_clips() + (video_train ? video_train->padded_clips() : 0);
  return summary;
}

}  // namespace sparsevit::pipelines
