#include "train/trainer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "analysis/attention_report.h"
#include "config/attention_spec.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/model_registry.h"
#include "train/checkpoint.h"
#include "train/checkpoint_model.h"
#include "train/cpu_threads.h"
#include "train/distributed.h"
#include "train/losses.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/mixup.h"
#include "train/model_ema.h"
#include "train/nan_guard.h"
#include "train/optimizer.h"
#include "train/progress_bar.h"
#include "util/errors.h"

namespace sparsevit::train {

nlohmann::json TrainSummary::to_json() const {
  nlohmann::json j = {{"test_acc1", test_acc1},
                      {"test_acc5", test_acc5},
                      {"test_loss", test_loss},
                      {"attention_gflops", attention_gflops},
                      {"attention_gflops_patch", attention_gflops_patch},
                      {"pruning_ratio", pruning_ratio},
                      {"density", density},
                      {"params", params},
                      {"epochs", epochs_run}};
  if (ema_acc1 >= 0) j["ema_acc1"] = ema_acc1;
  return j;
}

std::string TrainSummary::to_text() const {
  return fmt::format(
      "top-1 accuracy {:.2f}%{} | attention GFLOPs {:.6f} (patch pairs only {:.6f}) | pruning ratio {:.4f} | "
      "density {:.4f} | {:.3f}M params",
      test_acc1, ema_acc1 >= 0 ? fmt::format(" (EMA {:.2f}%)", ema_acc1) : std::string(), attention_gflops,
      attention_gflops_patch, pruning_ratio, density, params / 1e6);
}

nlohmann::json config_to_json(const TrainConfig& c) {
  return {{"dataset", c.dataset},
          {"data_path", c.data_path},
          {"nb_classes", c.nb_classes},
          {"max_train_samples", c.max_train_samples},
          {"max_eval_samples", c.max_eval_samples},
          {"num_workers", c.num_workers},
          {"model", c.model},
          {"attn_cfg", c.attn_cfg},
          {"attn_set", c.attn_set},
          {"drop_path", c.drop_path},
          {"epochs", c.epochs},
          {"batch_size", c.batch_size},
          {"blr", c.blr},
          {"lr", c.lr},
          {"min_lr", c.min_lr},
          {"warmup_epochs", c.warmup_epochs},
          {"weight_decay", c.weight_decay},
          {"opt_eps", c.opt_eps},
          {"clip_grad", c.clip_grad},
          {"smoothing", c.smoothing},
          {"mixup", c.mixup},
          {"cutmix", c.cutmix},
          {"mixup_prob", c.mixup_prob},
          {"mixup_switch_prob", c.mixup_switch_prob},
          {"aa", c.aa},
          {"color_jitter", c.color_jitter},
          {"train_crop", c.train_crop},
          {"model_ema", c.model_ema},
          {"model_ema_decay", c.model_ema_decay},
          {"output_dir", c.output_dir},
          {"log_dir", c.log_dir},
          {"resume", c.resume},
          {"save_ckpt_freq", c.save_ckpt_freq},
          {"start_epoch", c.start_epoch},
          {"eval", c.eval},
          {"seed", c.seed},
          {"threads", c.threads},
          {"dist_backend", c.dist_backend},
          {"dist_url", c.dist_url},
          {"dist_timeout", c.dist_timeout},
          {"dist_bucket_mb", c.dist_bucket_mb},
          {"dist_no_overlap", c.dist_no_overlap}};
}

TrainConfig resolve(TrainConfig c) {
  auto positive = [](const char* name, double v) {
    if (!(v > 0)) throw UsageError(std::string("--") + name + " must be > 0");
  };
  auto non_negative = [](const char* name, double v) {
    if (!(v >= 0)) throw UsageError(std::string("--") + name + " must be >= 0");
  };
  positive("batch_size", static_cast<double>(c.batch_size));
  non_negative("epochs", static_cast<double>(c.epochs));
  positive("blr", c.blr);
  non_negative("lr", c.lr);
  non_negative("min_lr", c.min_lr);
  non_negative("warmup_epochs", c.warmup_epochs);
  non_negative("weight_decay", c.weight_decay);
  positive("opt_eps", c.opt_eps);
  non_negative("clip_grad", c.clip_grad);
  non_negative("mixup", c.mixup);
  non_negative("cutmix", c.cutmix);
  non_negative("color_jitter", c.color_jitter);
  non_negative("max_train_samples", static_cast<double>(c.max_train_samples));
  non_negative("max_eval_samples", static_cast<double>(c.max_eval_samples));
  non_negative("num_workers", static_cast<double>(c.num_workers));
  non_negative("threads", static_cast<double>(c.threads));
  non_negative("start_epoch", static_cast<double>(c.start_epoch));
  non_negative("save_ckpt_freq", static_cast<double>(c.save_ckpt_freq));
  if (c.smoothing < 0 || c.smoothing >= 1) throw UsageError("--smoothing must be in [0, 1)");
  if (c.mixup_prob < 0 || c.mixup_prob > 1) throw UsageError("--mixup_prob must be in [0, 1]");
  if (c.mixup_switch_prob < 0 || c.mixup_switch_prob > 1) throw UsageError("--mixup_switch_prob must be in [0, 1]");
  if (c.model_ema_decay < 0 || c.model_ema_decay >= 1) throw UsageError("--model_ema_decay must be in [0, 1)");
  if (c.drop_path < 0 || c.drop_path >= 1) throw UsageError("--drop_path must be in [0, 1)");
  if (c.train_crop != "pad" && c.train_crop != "rrc" && c.train_crop != "none")
    throw UsageError("--train_crop must be pad, rrc or none, got '" + c.train_crop + "'");
  if (c.eval && c.resume.empty()) throw UsageError("--eval needs --resume CHECKPOINT");
  positive("dist_timeout", c.dist_timeout);
  positive("dist_bucket_mb", c.dist_bucket_mb);
  if (c.dist_backend != "gloo" && c.dist_backend != "nccl")
    throw UsageError("--dist_backend must be gloo or nccl, got '" + c.dist_backend + "'");
  if (!dist::backend_available(c.dist_backend))
    throw UsageError("--dist_backend " + c.dist_backend + ": this LibTorch build has no NCCL (it is a CPU build); use gloo");
  if (c.aa == "none") c.aa.clear();
  if (c.log_dir.empty()) c.log_dir = c.output_dir;
  return c;
}

namespace {

struct EvalResult {
  double loss = 0, acc1 = 0, acc5 = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `text` to `path` atomically (temp file + rename), like the checkpoints.
void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw RuntimeError("cannot write '" + temp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) throw RuntimeError("cannot write '" + path + "': " + ec.message());
}

// Every process evaluates its shard; the sums are added over the ranks (pg != nullptr).
EvalResult evaluate(models::VisionTransformer& model, data::DataLoader& loader, int64_t epoch,
                    dist::ProcessGroup* pg, std::ostream& out) {
  torch::NoGradGuard no_grad;
  model.eval();
  loader.set_epoch(epoch);
  const int64_t classes = model.config().num_classes;
  double loss_sum = 0, correct1 = 0, correct5 = 0;
  int64_t seen = 0, done = 0;
  data::Batch batch;
  ProgressBar bar("Test", loader.num_batches(), loader.options().batch_size, out, stdout_is_tty());
  while (loader.next(batch)) {
    const at::Tensor logits = model.forward(batch.images);
    const int64_t n = batch.labels.size(0);
    loss_sum += at::cross_entropy_loss(logits, batch.labels, {}, at::Reduction::Sum).item<double>();
    const at::Tensor top = std::get<1>(logits.topk(std::min<int64_t>(5, classes), 1));
    const at::Tensor hits = top.eq(batch.labels.unsqueeze(1));
    correct1 += hits.narrow(1, 0, 1).sum().item<double>();
    correct5 += hits.sum().item<double>();
    seen += n;
    bar.update(++done, loss_sum / seen);
  }
  bar.finish();
  if (pg != nullptr) {
    at::Tensor sums = at::tensor(std::vector<double>{loss_sum, correct1, correct5, static_cast<double>(seen)},
                                 at::TensorOptions().dtype(at::kDouble));
    pg->allreduce_sum(sums);
    loss_sum = sums[0].item<double>();
    correct1 = sums[1].item<double>();
    correct5 = sums[2].item<double>();
    seen = static_cast<int64_t>(sums[3].item<double>());
  }
  if (seen == 0) throw UsageError("the evaluation set is empty");
  return {loss_sum / seen, 100.0 * correct1 / seen, 100.0 * correct5 / seen};
}

// The model and attention a checkpoint was trained with override the flags, so that
// `sparsevit eval --resume ckpt` rebuilds exactly that model.
void adopt_checkpoint_model(TrainConfig& c, config::AttentionSpec& spec, std::string& attention_yaml,
                            const LoadedCheckpoint& ckpt) {
  const std::optional<CheckpointModel> m = checkpoint_model(ckpt);
  if (!m) return;
  if (m->model != c.model) spdlog::info("using the checkpoint's model {} (not {})", m->model, c.model);
  c.model = m->model;
  if (m->nb_classes > 0) c.nb_classes = m->nb_classes;
  attention_yaml = m->attention_yaml;
  c.attn_set = m->attention_overrides;
  spec = m->attention;
}

}  // namespace

namespace {

// Rank 0 logs at the configured level; the other ranks only warnings and errors.
class QuietLogScope {
 public:
  explicit QuietLogScope(bool quiet) : level_(spdlog::get_level()), quiet_(quiet) {
    if (quiet_) spdlog::set_level(spdlog::level::warn);
  }
  ~QuietLogScope() {
    if (quiet_) spdlog::set_level(level_);
  }

 private:
  spdlog::level::level_enum level_;
  bool quiet_;
};

}  // namespace

TrainSummary run_finetune(const TrainConfig& raw) {
  TrainConfig c = resolve(raw);
  // Data parallelism: a process group when a launcher started several processes; none at all
  // for a single process. Only rank 0 writes files and draws progress.
  const dist::LaunchInfo launch = dist::launch_info_from_environment();
  std::unique_ptr<dist::ProcessGroup> pg;
  if (launch.distributed()) {
    pg = dist::ProcessGroup::create(launch, {c.dist_backend, c.dist_url, c.dist_timeout});
  }
  const int64_t rank = launch.rank, world = launch.distributed() ? launch.world_size : 1;
  const bool main_rank = rank == 0;
  const QuietLogScope quiet_logs(!main_rank);
  std::ostream null_stream(nullptr);  // a stream that drops everything (non-zero ranks)
  std::ostream& out = main_rank ? std::cout : null_stream;
  if (pg) {
    spdlog::info("distributed: {} processes ({} backend, rendezvous {}, launched by {}), {} per-process batch = {} global",
                 world, c.dist_backend, c.dist_url == "env://" ? fmt::format("tcp://{}:{}", launch.master_addr, launch.master_port)
                                                               : c.dist_url,
                 launch.launcher, c.batch_size, c.batch_size * world);
  }
  // Every core, shared among the processes on this machine.
  const int64_t threads =
      c.threads > 0 ? c.threads
                    : std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) /
                                               std::max<int64_t>(1, pg ? launch.local_world_size : 1));
  configure_cpu_threads(threads);
  torch::manual_seed(static_cast<uint64_t>(c.seed));
  std::mt19937_64 host_rng(static_cast<uint64_t>(c.seed) * 0x9E3779B97F4A7C15ULL + 1);

  // Attention: the YAML text travels in the checkpoint so a run can be rebuilt exactly.
  std::string attention_yaml = c.attn_cfg.empty() ? config::default_attention_yaml() : read_text(c.attn_cfg);
  config::AttentionSpec spec = c.attn_cfg.empty() ? config::default_attention_spec()
                                                  : config::load_attention_spec(c.attn_cfg);
  config::apply_mask_kwarg_overrides(spec, c.attn_set);
  std::optional<LoadedCheckpoint> ckpt;
  if (!c.resume.empty()) {
    ckpt.emplace(c.resume);
    adopt_checkpoint_model(c, spec, attention_yaml, *ckpt);
  }

  // Data.
  if (c.data_path.empty()) c.data_path = data::default_data_path(c.dataset);
  if (c.data_path.empty()) throw UsageError("--data_path is required for dataset '" + c.dataset + "'");
  auto eval_set = data::max_samples(data::make_dataset(c.dataset, c.data_path, false), c.max_eval_samples);
  std::shared_ptr<const data::Dataset> train_set;
  if (!c.eval) train_set = data::max_samples(data::make_dataset(c.dataset, c.data_path, true), c.max_train_samples);
  if (c.nb_classes <= 0) c.nb_classes = eval_set->num_classes();

  // Model.
  models::ModelOptions options;
  options.num_classes = c.nb_classes;
  options.drop_path_rate = c.drop_path;
  options.attention = spec;
  auto model = models::create_model(c.model, options);
  const models::VitConfig& vc = model->config();
  std::vector<at::Tensor> model_state = model->parameters();
  for (const auto& b : model->buffers()) model_state.push_back(b);
  const int64_t bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(c.dist_bucket_mb * (1 << 20)));
  if (pg) {
    pg->broadcast(model_state, 0, bucket_bytes);  // every rank starts from rank 0's weights
    // Stochastic depth and the like differ per rank (as MAE's seed + rank); data order and
    // augmentation come from the shared seed through the loader.
    torch::manual_seed(static_cast<uint64_t>(c.seed + rank));
  }
  data::TransformConfig tc = data::transform_config_for(c.dataset, vc.img_size, vc.in_chans);
  tc.train_crop = c.train_crop;
  tc.color_jitter = c.color_jitter;
  tc.auto_augment = c.aa;
  data::validate(tc);

  data::LoaderOptions eval_options;
  eval_options.batch_size = c.batch_size;
  eval_options.num_workers = c.num_workers;
  eval_options.seed = static_cast<uint64_t>(c.seed);
  eval_options.rank = rank;
  eval_options.world_size = world;
  eval_options.even_shards = false;  // every test sample exactly once over the ranks
  data::DataLoader eval_loader(eval_set, data::build_eval_transform(tc), eval_options);

  // Attention cost of this model, from the patterns its kernels run.
  const analysis::AttentionReport report =
      analysis::attention_report(spec, vc.attention_geometry(), model->layer_patterns());
  TrainSummary summary;
  summary.attention_gflops = report.attention_gflops;
  summary.attention_gflops_patch = report.attention_gflops_patch;
  summary.pruning_ratio = report.pruning_ratio;
  summary.density = report.density;
  for (const auto& p : model->parameters()) summary.params += p.numel();
  spdlog::info("model {} ({:.2f}M params, {} tokens, attention {} kernel {}): pruning ratio {:.4f}, attention GFLOPs {:.4f}",
               c.model, summary.params / 1e6, vc.num_tokens(), spec.has_mask() ? spec.mask : "dense",
               model->blocks().front()->attn().kernel_name(), report.pruning_ratio, report.attention_gflops);
  spdlog::info("data {}: {} train / {} eval samples, {} classes, {} threads", c.dataset,
               train_set ? train_set->size() : 0, eval_set->size(), c.nb_classes, threads);

  const nlohmann::json metadata = {{"model", c.model},
                                   {"nb_classes", c.nb_classes},
                                   {"attention_yaml", attention_yaml},
                                   {"attention_source", spec.source},
                                   {"attention_overrides", c.attn_set},
                                   {"world_size", world},
                                   {"config", config_to_json(c)}};
  if (c.eval) {
    ckpt->load_model(*model);
    const EvalResult r = evaluate(*model, eval_loader, 0, pg.get(), out);
    summary.test_acc1 = r.acc1;
    summary.test_acc5 = r.acc5;
    summary.test_loss = r.loss;
    summary.rank = rank;
    summary.world_size = world;
    return summary;
  }

  // Optimisation.
  // MAE: eff_batch_size = batch_size * accum_iter * world_size; lr = blr * eff_batch_size / 256.
  const double lr = c.lr > 0 ? c.lr : effective_lr(c.blr, c.batch_size * world);
  auto optimizer = make_adamw(*model, OptimizerConfig{lr, c.weight_decay, c.opt_eps});
  const LrScheduleConfig schedule{lr, c.min_lr, c.warmup_epochs, static_cast<double>(std::max<int64_t>(1, c.epochs))};
  validate(schedule);
  MixupConfig mixup_config;
  mixup_config.mixup_alpha = c.mixup;
  mixup_config.cutmix_alpha = c.cutmix;
  mixup_config.prob = c.mixup_prob;
  mixup_config.switch_prob = c.mixup_switch_prob;
  mixup_config.label_smoothing = c.smoothing;
  mixup_config.num_classes = c.nb_classes;
  Mixup mixup(mixup_config);
  std::optional<ModelEma> ema;
  if (c.model_ema) ema.emplace(*model);

  data::LoaderOptions train_options;
  train_options.batch_size = c.batch_size;
  train_options.shuffle = true;
  train_options.drop_last = mixup.enabled();  // mixup pairs the batch with its reverse
  train_options.num_workers = c.num_workers;
  train_options.seed = static_cast<uint64_t>(c.seed);
  train_options.rank = rank;
  train_options.world_size = world;
  data::DataLoader train_loader(train_set, data::build_train_transform(tc), train_options);
  const int64_t iters = train_loader.num_batches();
  if (iters == 0) throw UsageError("the training set has fewer samples than one batch");

  int64_t start_epoch = c.start_epoch, global_step = 0;
  if (ckpt) {
    ckpt->load_model(*model);
    if (ckpt->has_optimizer()) ckpt->load_optimizer(*optimizer);
    if (ema && ckpt->has_ema()) ckpt->load_ema(*ema);
    if (!ckpt->host_rng_state().empty()) rng_from_state_string(host_rng, ckpt->host_rng_state());
    if (ckpt->has_torch_rng()) ckpt->restore_torch_rng();
    start_epoch = ckpt->epoch() + 1;
    global_step = ckpt->global_step();
    if (pg) {
      // The checkpoint holds rank 0's generator; give every rank its own stream again.
      torch::manual_seed(static_cast<uint64_t>(c.seed + rank) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(start_epoch));
      pg->broadcast(model_state, 0, bucket_bytes);
    }
    spdlog::info("resumed from {} at epoch {}", ckpt->path(), start_epoch);
  }
  std::optional<dist::GradientReducer> reducer;
  if (pg) {
    std::vector<at::Tensor> trainable;
    for (const auto& p : model->parameters())
      if (p.requires_grad()) trainable.push_back(p);
    reducer.emplace(*pg, trainable, bucket_bytes, !c.dist_no_overlap);
    spdlog::info("gradient averaging: {} allreduce bucket(s) of at most {} MB per step, {}", reducer->num_buckets(),
                 c.dist_bucket_mb, c.dist_no_overlap ? "after backward" : "overlapping with backward");
  }

  std::optional<MetricsLog> metrics;
  if (!c.output_dir.empty() && main_rank) {
    std::filesystem::create_directories(c.output_dir);
    write_text_atomically(c.output_dir + "/config.json", config_to_json(c).dump(2) + "\n");
    write_text_atomically(c.output_dir + "/attention.yaml", attention_yaml);
  }
  if (!c.log_dir.empty() && main_rank) {
    std::filesystem::create_directories(c.log_dir);
    metrics.emplace(c.log_dir + "/metrics.jsonl");
  }

  EvalResult last;
  for (int64_t epoch = start_epoch; epoch < c.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    model->train();
    train_loader.set_epoch(epoch);
    ProgressBar bar(fmt::format("Epoch {}/{}", epoch + 1, c.epochs), iters, c.batch_size * world, out, stdout_is_tty(),
                    c.print_freq > 0 ? static_cast<int>(std::max<int64_t>(1, 100 / c.print_freq)) : 10);
    double loss_sum = 0, lr_now = lr;
    int64_t it = 0, images = 0;
    data::Batch batch;
    while (train_loader.next(batch)) {
      lr_now = cosine_lr(schedule, fractional_epoch(epoch, it, iters));
      set_learning_rate(*optimizer, lr_now);
      at::Tensor loss;
      if (mixup.enabled()) {
        auto [images, targets] = mixup.apply(batch.images, batch.labels, host_rng);
        loss = soft_target_cross_entropy(model->forward(images), targets);
      } else if (c.smoothing > 0) {
        loss = label_smoothing_cross_entropy(model->forward(batch.images), batch.labels, c.smoothing);
      } else {
        loss = at::cross_entropy_loss(model->forward(batch.images), batch.labels);
      }
      const double loss_value = loss.item<double>();
      check_finite_loss(loss_value, epoch, global_step);
      optimizer->zero_grad();
      loss.backward();
      if (reducer) reducer->finish();  // .grad = the mean over the ranks
      if (c.clip_grad > 0) clip_grad_norm(model->parameters(), c.clip_grad);
      optimizer->step();
      if (ema) ema->update(*model, c.model_ema_decay);
      loss_sum += loss_value;
      images += batch.labels.size(0);
      ++global_step;
      bar.update(++it, loss_value, lr_now);
    }
    bar.finish();
    const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double steps = static_cast<double>(it), images_seen = static_cast<double>(images);
    if (pg) {
      // Every rank ran the same number of equally sized steps: the mean of the ranks' step
      // losses is the loss of the global batch.
      at::Tensor sums = at::tensor(std::vector<double>{loss_sum, steps, images_seen}, at::TensorOptions().dtype(at::kDouble));
      pg->allreduce_sum(sums);
      loss_sum = sums[0].item<double>();
      steps = sums[1].item<double>();
      images_seen = sums[2].item<double>();
    }
    const double train_loss = loss_sum / std::max(1.0, steps);

    last = evaluate(*model, eval_loader, epoch, pg.get(), out);
    double ema_acc1 = -1;
    if (ema) {
      EmaWeightsScope scope(*ema, *model);
      ema_acc1 = evaluate(*model, eval_loader, epoch, pg.get(), out).acc1;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json record = {{"epoch", epoch},          {"train_loss", train_loss},
                             {"test_loss", last.loss},  {"test_acc1", last.acc1},
                             {"test_acc5", last.acc5},  {"lr", lr_now},
                             {"epoch_seconds", seconds}};
    record["train_images_per_second"] = train_seconds > 0 ? images_seen / train_seconds : 0.0;  // all ranks
    if (pg) record["world_size"] = world;
    if (ema) record["test_acc1_ema"] = ema_acc1;
    out << fmt::format("Epoch {}/{}: train loss {:.4f}  test loss {:.4f}  acc@1 {:.2f}  acc@5 {:.2f}{}  ({:.1f} s)",
                             epoch + 1, c.epochs, train_loss, last.loss, last.acc1, last.acc5,
                             ema ? fmt::format("  ema acc@1 {:.2f}", ema_acc1) : std::string(), seconds)
              << std::endl;
    if (metrics) metrics->append(record);
    if (!c.output_dir.empty() && main_rank) {
      CheckpointContents contents;
      contents.model = model.get();
      contents.optimizer = optimizer.get();
      contents.ema = ema ? &*ema : nullptr;
      contents.epoch = epoch;
      contents.global_step = global_step;
      contents.host_rng_state = rng_state_string(host_rng);
      contents.metadata_json = metadata.dump();
      save_checkpoint(c.output_dir + "/checkpoint.pt", contents);
      if (c.save_ckpt_freq > 0 && (epoch + 1) % c.save_ckpt_freq == 0)
        save_checkpoint(c.output_dir + "/checkpoint-" + std::to_string(epoch) + ".pt", contents);
    }
    summary.ema_acc1 = ema_acc1;
    summary.epochs_run++;
  }
  if (summary.epochs_run == 0) last = evaluate(*model, eval_loader, start_epoch, pg.get(), out);
  summary.test_acc1 = last.acc1;
  summary.test_acc5 = last.acc5;
  summary.test_loss = last.loss;
  summary.rank = rank;
  summary.world_size = world;
  return summary;
}

}  // namespace sparsevit::train
