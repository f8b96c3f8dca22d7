#include "train/engine.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "runtime/autocast.h"
#include "train/checkpoint.h"
#include "train/nan_guard.h"
#include "train/optimizer.h"
#include "train/progress_bar.h"
#include "util/errors.h"

namespace sparsevit::train {
namespace {

// Where a run's own counters travel in the checkpoint's metadata.
constexpr const char* kStateKey = "train_state";

std::vector<at::Tensor> parameters_and_buffers(torch::nn::Module& model) {
  std::vector<at::Tensor> state = model.parameters();
  for (const auto& b : model.buffers()) state.push_back(b);
  return state;
}

int64_t bucket_bytes(const OptimizationOptions& o) {
  return std::max<int64_t>(1, static_cast<int64_t>(o.dist_bucket_mb * (1 << 20)));
}

LrScheduleConfig schedule_of(const OptimizationOptions& o) {
  const LrScheduleConfig schedule{o.lr, o.min_lr, o.warmup_epochs, static_cast<double>(std::max<int64_t>(1, o.epochs))};
  validate(schedule);
  return schedule;
}

}  // namespace

TrainState::TrainState(torch::nn::Module& model, const OptimizationOptions& options, ProcessContext& process,
                       const LoadedCheckpoint* checkpoint)
    : model_(model),
      options_(options),
      process_(process),
      host_rng_(options.host_seed * 0x9E3779B97F4A7C15ULL + 1) {
  if (options_.accum_iter < 1) throw UsageError("--accum_iter must be >= 1");
  schedule_of(options_);
  dist::ProcessGroup* group = process.group();
  const std::vector<at::Tensor> model_state = parameters_and_buffers(model);
  if (group != nullptr) {
    group->broadcast(model_state, 0, bucket_bytes(options_));  // every rank starts from rank 0's weights
    process.reseed_per_rank(static_cast<int64_t>(options_.host_seed));
  }
  OptimizerConfig adamw;
  adamw.lr = options_.lr;
  adamw.weight_decay = options_.weight_decay;
  adamw.eps = options_.opt_eps;
  adamw.betas = options_.betas;
  adamw.no_weight_decay_names = options_.no_weight_decay_names;
  adamw.layer_decay = options_.layer_decay;
  adamw.num_layers = options_.num_layers;
  adamw.layer_prefix = options_.layer_prefix;
  optimizer_ = make_adamw(model, adamw);
  for (const ParameterGroup& g : parameter_groups(model, adamw)) lr_scales_.push_back(g.lr_scale);
  if (checkpoint != nullptr) {
    checkpoint->load_model(model);
    if (checkpoint->has_optimizer()) checkpoint->load_optimizer(*optimizer_);
    if (!checkpoint->host_rng_state().empty()) rng_from_state_string(host_rng_, checkpoint->host_rng_state());
    if (checkpoint->has_torch_rng()) checkpoint->restore_torch_rng();
    start_epoch_ = checkpoint->epoch() + 1;
    global_step_ = checkpoint->global_step();
    const nlohmann::json metadata = nlohmann::json::parse(checkpoint->metadata_json(), nullptr, false);
    if (metadata.is_object() && metadata.contains(kStateKey) && metadata[kStateKey].is_object()) {
      attention_gflops_sum_ = metadata[kStateKey].value("attention_gflops_sum", 0.0);
      attention_iterations_ = metadata[kStateKey].value("attention_iterations", int64_t{0});
    }
    if (group != nullptr) {
      // The checkpoint holds rank 0's generator; give every rank its own stream again.
      process.reseed_per_rank(static_cast<int64_t>(options_.host_seed), start_epoch_);
      group->broadcast(model_state, 0, bucket_bytes(options_));
    }
    spdlog::info("resumed from {} at epoch {}", checkpoint->path(), start_epoch_);
  }
  // The average starts from the weights training continues from (timm: after loading).
  if (options_.model_ema) {
    ema_.emplace(model, /*copy_buffers=*/options_.model_ema_warmup.has_value());  // DP's EMAModel copies buffers
    if (checkpoint != nullptr && checkpoint->has_ema()) checkpoint->load_ema(*ema_);
  }
  for (const auto& p : model.parameters())
    if (p.requires_grad()) trainable_.push_back(p);
  if (group != nullptr) {
    reducer_.emplace(*group, trainable_, bucket_bytes(options_), !options_.dist_no_overlap);
    spdlog::info("gradient averaging: {} allreduce bucket(s) of at most {} MB per step, {}", reducer_->num_buckets(),
                 options_.dist_bucket_mb, options_.dist_no_overlap ? "after backward" : "overlapping with backward");
  }
}

TrainState::~TrainState() = default;

double TrainState::attention_gflops_paid() const {
  return attention_iterations_ > 0 ? attention_gflops_sum_ / static_cast<double>(attention_iterations_) : 0.0;
}

void TrainState::save_checkpoint(const std::string& path, int64_t epoch, const nlohmann::json& metadata) const {
  nlohmann::json meta = metadata;
  meta[kStateKey] = {{"attention_gflops_sum", attention_gflops_sum_}, {"attention_iterations", attention_iterations_}};
  CheckpointContents contents;
  contents.model = &model_;
  contents.optimizer = optimizer_.get();
  contents.ema = ema_ ? &*ema_ : nullptr;
  contents.epoch = epoch;
  contents.global_step = global_step_;
  contents.host_rng_state = rng_state_string(host_rng_);
  contents.metadata_json = meta.dump();
  train::save_checkpoint(path, contents);
}

// The body of train_one_epoch, with access to the state's internals.
struct EpochRunner {
  static EpochStats run(TrainTask& task, TrainState& s, data::BatchSource& loader, int64_t epoch, ProcessContext& process) {
    const auto t0 = std::chrono::steady_clock::now();
    const OptimizationOptions& o = s.options_;
    const LrScheduleConfig schedule = schedule_of(o);
    s.model_.train();
    loader.set_epoch(epoch);
    const int64_t iters = loader.num_batches();
    if (iters == 0) throw UsageError("the training set has fewer samples than one batch");
    const double total_iters = static_cast<double>(std::max<int64_t>(1, o.epochs)) * static_cast<double>(iters);
    ProgressBar bar(fmt::format("Epoch {}/{}", epoch + 1, o.epochs), iters,
                    loader.batch_size() * process.world_size(), process.out(), stdout_is_tty(),
                    o.print_freq > 0 ? static_cast<int>(std::max<int64_t>(1, 100 / o.print_freq)) : 10);
    double loss_sum = 0, gflops_sum = 0, lr_now = o.lr;
    int64_t it = 0, images = 0;
    data::Batch batch;
    while (loader.next(batch)) {
      // An optimizer step every accum_iter batches, and at the epoch's last batch.
      const bool first_of_step = it % o.accum_iter == 0;
      const bool last_of_step = (it + 1) % o.accum_iter == 0 || it + 1 == iters;
      if (first_of_step) {
        lr_now = cosine_lr(schedule, fractional_epoch(epoch, it, iters));
        set_learning_rate(*s.optimizer_, lr_now, s.lr_scales_);
      }
      task.set_progress(static_cast<double>(epoch * iters + it) / total_iters);
      gflops_sum += task.attention_gflops_now();
      if (s.reducer_) s.reducer_->set_sync(last_of_step);  // accumulation steps communicate nothing
      at::Tensor loss;
      {
        const runtime::AutocastGuard autocast(o.amp_bf16);
        loss = task.loss(batch, s.host_rng_);
      }
      const double loss_value = loss.item<double>();
      check_finite_loss(loss_value, epoch, s.global_step_);
      if (first_of_step) zero_grad_to_none(*s.optimizer_);
      if (o.accum_iter > 1) {
        (loss / static_cast<double>(o.accum_iter)).backward();
      } else {
        loss.backward();
      }
      if (last_of_step) {
        if (s.reducer_) s.reducer_->finish();  // .grad = the mean over the ranks
        if (o.clip_grad > 0) clip_grad_norm(s.trainable_, o.clip_grad);
        s.optimizer_->step();
        if (s.ema_) {
          double decay = o.model_ema_decay;
          if (o.model_ema_warmup) {
            EmaWarmup warmup = *o.model_ema_warmup;
            warmup.max_value = o.model_ema_decay;
            decay = ema_warmup_decay(s.ema_->num_updates(), warmup);
          }
          s.ema_->update(s.model_, decay);
        }
        ++s.global_step_;
      }
      loss_sum += loss_value;
      images += batch.labels.size(0);
      bar.update(++it, loss_value, lr_now);
    }
    bar.finish();
    // Evaluation and checkpoints between epochs see the budget reached at the epoch's end.
    task.set_progress(static_cast<double>((epoch + 1) * iters) / total_iters);
    s.attention_gflops_sum_ += gflops_sum;
    s.attention_iterations_ += it;

    EpochStats stats;
    stats.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double steps = static_cast<double>(it), images_seen = static_cast<double>(images);
    if (dist::ProcessGroup* group = process.group()) {
      // Every rank ran the same number of equally sized steps: the mean of the ranks' step
      // losses is the loss of the global batch.
      at::Tensor sums = at::tensor(std::vector<double>{loss_sum, steps, images_seen}, at::TensorOptions().dtype(at::kDouble));
      group->allreduce_sum(sums);
      loss_sum = sums[0].item<double>();
      steps = sums[1].item<double>();
      images_seen = sums[2].item<double>();
    }
    stats.loss = loss_sum / std::max(1.0, steps);
    stats.images = images_seen;
    stats.lr = lr_now;
    stats.attention_gflops = it > 0 ? gflops_sum / static_cast<double>(it) : 0.0;
    return stats;
  }
};

EpochStats train_one_epoch(TrainTask& task, TrainState& state, data::BatchSource& loader, int64_t epoch,
                           ProcessContext& process) {
  return EpochRunner::run(task, state, loader, epoch, process);
}

namespace {

// Top-1 / top-5 hits and the summed cross-entropy of logits [n, K] against labels [n].
void add_scores(const at::Tensor& logits, const at::Tensor& labels, int64_t num_classes, double& loss_sum,
                double& correct1, double& correct5) {
  loss_sum += at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum).item<double>();
  const at::Tensor top = std::get<1>(logits.topk(std::min<int64_t>(5, num_classes), 1));
  const at::Tensor hits = top.eq(labels.unsqueeze(1));
  correct1 += hits.narrow(1, 0, 1).sum().item<double>();
  correct5 += hits.sum().item<double>();
}

}  // namespace

ClassifierMetrics evaluate_classifier(torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& forward,
                                      int64_t num_classes, data::BatchSource& loader, int64_t epoch,
                                      ProcessContext& process, const EvalViews& views) {
  torch::NoGradGuard no_grad;
  model.eval();
  loader.set_epoch(epoch);
  const bool multi_view = views.views > 1;
  if (multi_view && views.num_items < 1) throw UsageError("multi-view evaluation needs the number of items");
  // Multi-view: per item, the sums of its views' logits and labels and its view count, added
  // over ranks (the views of one item may run on several).
  at::Tensor item_logits, item_labels, item_views;
  if (multi_view) {
    item_logits = at::zeros({views.num_items, num_classes}, at::kDouble);
    item_labels = at::zeros({views.num_items}, at::kDouble);
    item_views = at::zeros({views.num_items}, at::kDouble);
  }
  double loss_sum = 0, correct1 = 0, correct5 = 0;
  int64_t seen = 0, done = 0;
  data::Batch batch;
  ProgressBar bar("Test", loader.num_batches(), loader.batch_size(), process.out(), stdout_is_tty());
  while (loader.next(batch)) {
    const at::Tensor logits = forward(batch.images).to(at::kFloat);
    const int64_t n = batch.labels.size(0);
    if (multi_view) {
      const at::Tensor items = at::tensor(batch.indices, at::kLong).div(views.views, "floor");
      item_logits.index_add_(0, items, logits.to(at::kDouble));
      item_labels.index_add_(0, items, batch.labels.to(at::kDouble));  // label x views, wherever they ran
      item_views.index_add_(0, items, at::ones({n}, at::kDouble));
    } else {
      add_scores(logits, batch.labels, num_classes, loss_sum, correct1, correct5);
    }
    seen += n;
    bar.update(++done, multi_view ? 0.0 : loss_sum / seen);
  }
  bar.finish();
  dist::ProcessGroup* group = process.group();
  if (multi_view) {
    if (group) {
      group->allreduce_sum(item_logits);
      group->allreduce_sum(item_labels);
      group->allreduce_sum(item_views);
    }
    const at::Tensor scored = item_views.gt(0);
    const at::Tensor counts = item_views.masked_select(scored);
    const at::Tensor mean_logits = item_logits.index({scored}) / counts.unsqueeze(1);
    const at::Tensor labels = item_labels.index({scored}) / counts;
    loss_sum = correct1 = correct5 = 0;
    seen = mean_logits.size(0);
    if (seen == 0) throw UsageError("the evaluation set is empty");
    add_scores(mean_logits.to(at::kFloat), labels.round().to(at::kLong), num_classes, loss_sum, correct1, correct5);
    return {loss_sum / seen, 100.0 * correct1 / seen, 100.0 * correct5 / seen};
  }
  if (group) {
    at::Tensor sums = at::tensor(std::vector<double>{loss_sum, correct1, correct5, static_cast<double>(seen)},
                                 at::TensorOptions().dtype(at::kDouble));
    group->allreduce_sum(sums);
    loss_sum = sums[0].item<double>();
    correct1 = sums[1].item<double>();
    correct5 = sums[2].item<double>();
    seen = static_cast<int64_t>(sums[3].item<double>());
  }
  if (seen == 0) throw UsageError("the evaluation set is empty");
  return {loss_sum / seen, 100.0 * correct1 / seen, 100.0 * correct5 / seen};
}

}  // namespace sparsevit::train
