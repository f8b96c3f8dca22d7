#include "pipelines/policy_train.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "analysis/attention_report.h"
#include "episodes/demonstrations.h"
#include "models/pretrained_weights.h"
#include "models/vision_transformer.h"
#include "pipelines/policy_checkpoint.h"
#include "pipelines/run_setup.h"
#include "policy/episode_batches.h"
#include "policy/eval_mode_scope.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/metrics_log.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "weights/weight_file.h"

namespace sparsevit::pipelines {
namespace {

class PolicyTask : public train::TrainTask {
 public:
  explicit PolicyTask(policy::DiffusionPolicy& policy) : policy_(policy) {}
  at::Tensor loss(const data::Batch& batch, std::mt19937_64&) override {
    // The default generator: checkpoints save its state, so a resumed run draws the same noise.
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    const auto pose = batch.extras.find("block_pose");
    const policy::PolicyLoss l = policy_.compute_loss(batch.images, batch.extras.at("agent_pos"), batch.extras.at("action"),
                                                      gen, pose == batch.extras.end() ? at::Tensor() : pose->second);
    if (l.reconstruction.defined()) reconstruction_sum_ += l.reconstruction.item<double>();
    if (l.pose.defined()) pose_sum_ += l.pose.item<double>();
    ++batches_;
    return l.total;
  }
  double attention_gflops_now() const override {
    return policy_.encoder_attention_gflops() * static_cast<double>(policy_.config().obs_horizon);
  }
  // Crossway's and the block-pose head's weighted losses averaged since the last call (0 when off).
  void take_auxiliary_means(double* reconstruction, double* pose) {
    *reconstruction = batches_ ? reconstruction_sum_ / static_cast<double>(batches_) : 0.0;
    *pose = batches_ ? pose_sum_ / static_cast<double>(batches_) : 0.0;
    reconstruction_sum_ = pose_sum_ = 0;
    batches_ = 0;
  }

 private:
  policy::DiffusionPolicy& policy_;
  double reconstruction_sum_ = 0, pose_sum_ = 0;
  int64_t batches_ = 0;
};

// DP's LinearNormalizer fit on every step of the demonstrations (actions; the low-dim vector:
// agent positions = state columns 0 and 1, or the low-dim policy's agent position + block pose).
policy::PolicyNormalizers fit_normalizers(const episodes::EpisodeSet& set, policy::PolicyObservation observation) {
  const int64_t n = set.steps(), ld = policy::lowdim_dim(observation);
  at::Tensor lowdim = at::empty({n, ld}, at::kFloat);
  float* out = lowdim.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) policy::lowdim_features(observation, set.state.data() + i * set.state_dim, out + i * ld);
  const at::Tensor action = at::from_blob(const_cast<float*>(set.action.data()), {n, set.action_dim}, at::kFloat);
  return {policy::ActionNormalizer::fit(action.clone()), policy::ActionNormalizer::fit(lowdim)};
}

// The validation loss (DP's val_loss): mean epsilon MSE over `batches` batches of the held-out
// episodes' windows, with the same windows, noise and timesteps every epoch (one generator seeded
// the same), so that epochs compare.
class ValidationLoss {
 public:
  ValidationLoss(std::shared_ptr<const episodes::EpisodeSet> demos, const policy::EpisodeBatchOptions& train_options,
                 const std::vector<bool>& held_out, int64_t batches, uint64_t seed)
      : batches_(batches), seed_(seed) {
    policy::EpisodeBatchOptions o = train_options;
    o.drop_last = false;
    o.rank = 0;
    o.world_size = 1;
    source_.emplace(std::move(demos), o, held_out);
  }
  double operator()(policy::DiffusionPolicy& policy) {
    const policy::DiffusionPolicyConfig& pc = policy.config();
    policy::EvalModeScope eval_mode(policy);
    at::NoGradGuard no_grad;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed_);
    source_->set_epoch(0);
    double sum = 0;
    int64_t windows = 0;
    data::Batch batch;
    for (int64_t i = 0; i < batches_ && source_->next(batch); ++i) {
      const at::Tensor& actions = batch.extras.at("action");
      const int64_t b = actions.size(0);
      const at::Tensor eps = at::randn({b, pc.pred_horizon, pc.action_dim}, gen, at::kFloat);
      const at::Tensor t = at::randint(0, pc.noise.num_train_timesteps, {b}, gen, at::TensorOptions(at::kLong));
      sum += policy.denoising_error(batch.images, batch.extras.at("agent_pos"), actions, eps, t).sum().item<double>();
      windows += b;
    }
    return windows > 0 ? sum / static_cast<double>(windows) : 0.0;
  }

 private:
  std::optional<policy::EpisodeBatchSource> source_;
  int64_t batches_;
  uint64_t seed_;
};

// The best validation loss of the epochs before `first_epoch` in a resumed run's metrics.jsonl.
double best_recorded_val_loss(const std::string& output_dir, int64_t first_epoch) {
  double best = std::numeric_limits<double>::infinity();
  std::ifstream in(output_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_object() && r.contains("val_loss") && r.value("epoch", int64_t{-1}) < first_epoch)
      best = std::min(best, r["val_loss"].get<double>());
  }
  return best;
}

// --finetune: the encoder from a pretraining checkpoint (MAE's, or any ViT weights with timm's
// names) through finetune's weight filters (the decoder, mask token and heads are not the
// encoder's and are dropped). Returns what the checkpoints record about it: the file, the
// tensors loaded, and the pretraining run's config when the file is one of our checkpoints (its
// data and recipe: the evidence that no label went in).
nlohmann::json load_encoder_weights(policy::DiffusionPolicy& model, const std::string& path) {
  if (!model.has_encoder()) throw UsageError("--finetune: a low-dim policy has no encoder to initialise");
  const models::PretrainedLoad load = models::load_pretrained_file(model.encoder(), path);
  if (!load.missing.empty())
    throw UsageError("--finetune " + path + " lacks encoder weights (" + load.missing.front() + ", " +
                     std::to_string(load.missing.size()) + " in all): is it a checkpoint of this encoder?");
  spdlog::info("--finetune {}: {}", path, models::describe(load));
  nlohmann::json j = {{"finetune", path},
                      {"loaded", static_cast<int64_t>(load.loaded.size())},
                      {"dropped", static_cast<int64_t>(load.unexpected.size() + load.removed.size())}};
  if (weights::detect_weight_format(path) == weights::WeightFormat::checkpoint) {
    const nlohmann::json meta = nlohmann::json::parse(train::LoadedCheckpoint(path).metadata_json(), nullptr, false);
    if (meta.is_object() && meta.contains("config")) j["pretraining"] = meta["config"];
    if (meta.is_object() && meta.contains("mae")) j["pretraining_model"] = meta["mae"];
  }
  return j;
}

// What a resumed run's checkpoint recorded about the encoder's initial weights (null: nothing).
nlohmann::json recorded_encoder_init(const train::LoadedCheckpoint& ckpt) {
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json(), nullptr, false);
  return meta.is_object() && meta.contains("encoder_init") ? meta["encoder_init"] : nlohmann::json();
}

}  // namespace

TrainConfig policy_defaults() {
  TrainConfig c;
  c.model = "vit_nano_patch8_48";
  c.lr = 1e-4;  // Diffusion Policy: AdamW lr 1e-4, betas (0.95, 0.999), weight decay 1e-6
  c.weight_decay = 1e-6;
  c.warmup_epochs = 0.5;  // DP warms up over 500 steps
  c.min_lr = 0;
  c.batch_size = 64;
  c.epochs = 20;
  c.drop_path = 0;
  c.model_ema = true;
  c.model_ema_decay = 0.9999;
  return c;
}

nlohmann::json PolicyTrainSummary::to_json() const {
  nlohmann::json j = {{"obs_type", obs_type},
                      {"train_loss", train_loss},
                      {"first_epoch_loss", first_epoch_loss},
                      {"reconstruction_loss", reconstruction_loss},
                      {"params", params},
                      {"epochs_run", epochs_run},
                      {"windows", windows},
                      {"episodes", episodes},
                      {"encoder_attention_gflops", encoder_attention_gflops},
                      {"pruning_ratio", pruning_ratio},
                      {"seconds", seconds},
                      {"world_size", world_size},
                      {"checkpoint", checkpoint}};
  if (pose_loss > 0) j["pose_loss"] = pose_loss;
  if (validated) {
    j["best_val_loss"] = best_val_loss;
    j["best_epoch"] = best_epoch;
  }
  if (!evaluated_checkpoint.empty()) j["evaluated_checkpoint"] = evaluated_checkpoint;
  if (probed) j["probe"] = probe.to_json();
  if (evaluated) {
    j.update(eval.scores().to_json());
    j["eval_episodes"] = static_cast<int64_t>(eval.episodes.size());
    if (eval.has_floor) j["do_nothing"] = eval.floor.to_json();
  }
  if (evaluated_train) {
    j["train_seeds"] = eval_train.scores().to_json();
    j["train_seeds"]["episodes"] = static_cast<int64_t>(eval_train.episodes.size());
  }
  return j;
}

std::string PolicyTrainSummary::to_text() const {
  std::string s = fmt::format("policy: {} episodes, {} windows, {:.2f}M params, encoder attention {:.5f} GFLOPs/image "
                              "(pruning ratio {:.4f}); loss {:.4f} -> {:.4f} in {} epochs, {:.0f} s",
                              episodes, windows, params / 1e6, encoder_attention_gflops, pruning_ratio,
                              first_epoch_loss, train_loss, epochs_run, seconds);
  if (validated) s += fmt::format("\nbest validation loss {:.4f} at epoch {}", best_val_loss, best_epoch + 1);
  if (!evaluated_checkpoint.empty()) s += "\nevaluated: " + evaluated_checkpoint;
  if (probed) s += "\n" + probe.to_table();
  if (evaluated) s += "\nclosed loop, held-out seeds: " + eval_line(eval);
  if (evaluated_train) s += "\nclosed loop, training seeds: " + eval_line(eval_train);
  return s;
}

PolicyTrainSummary run_policy_train(const TrainConfig& raw) {
  const auto t0 = std::chrono::steady_clock::now();
  TrainConfig c = resolve(raw, kPolicy);
  check_device(c.device);
  train::ProcessContext process({c.threads, c.seed, c.dist_backend, c.dist_url, c.dist_timeout});
  const int64_t world = process.world_size();

  auto demos = std::make_shared<episodes::EpisodeSet>(episodes::read_demonstrations(c.data_path));
  std::vector<bool> mask;
  if (c.max_train_samples > 0 && c.max_train_samples < demos->episodes()) {
    mask.assign(static_cast<std::size_t>(demos->episodes()), false);
    for (int64_t e = 0; e < c.max_train_samples; ++e) mask[static_cast<std::size_t>(e)] = true;
  }
  std::optional<train::LoadedCheckpoint> ckpt;
  if (!c.resume.empty()) ckpt.emplace(c.resume);
  const PolicyDescription description = policy_description(c, demos->image_height);
  auto model = std::make_shared<policy::DiffusionPolicy>(description.config);
  const policy::PolicyObservation observation = description.config.observation;
  if (!ckpt) model->set_normalizers(fit_normalizers(*demos, observation));  // a resumed run restores them
  if (c.freeze_encoder && c.finetune.empty() && !ckpt)
    throw UsageError("--freeze_encoder needs --finetune CHECKPOINT (a frozen random encoder sees nothing)");
  if (c.freeze_encoder && c.layer_decay < 1)
    throw UsageError("--layer_decay applies to a trained encoder; it has no effect with --freeze_encoder");
  // The encoder's initial weights: from --finetune on a fresh run; a resumed run restores its own.
  nlohmann::json encoder_init = ckpt ? recorded_encoder_init(*ckpt) : nlohmann::json();
  if (!c.finetune.empty() && !ckpt) encoder_init = load_encoder_weights(*model, c.finetune);
  if (c.freeze_encoder) model->freeze_encoder();  // before the optimizer: its groups leave the encoder out

  policy::EpisodeBatchOptions bo;
  bo.obs_horizon = c.obs_horizon;
  bo.pred_horizon = c.pred_horizon;
  bo.action_horizon = c.action_horizon;
  bo.image_size = model->image_size();
  bo.batch_size = c.batch_size;
  bo.seed = static_cast<uint64_t>(c.seed);
  bo.rank = process.rank();
  bo.world_size = world;
  bo.observation = observation;
  policy::EpisodeBatchSource loader(demos, bo, mask);
  if (loader.num_batches() == 0) throw UsageError("the demonstrations have fewer windows than one batch");

  PolicyTrainSummary summary;
  summary.rank = process.rank();
  summary.world_size = world;
  summary.episodes = mask.empty() ? demos->episodes() : c.max_train_samples;
  summary.windows = loader.num_windows();
  for (const auto& p : model->parameters())
    if (p.requires_grad()) summary.params += p.numel();
  summary.obs_type = c.obs_type;
  if (model->has_encoder()) {
    const models::VitConfig& vc = model->encoder().config();
    const analysis::AttentionReport report =
        analysis::attention_report(vc.attention, vc.attention_geometry(), model->encoder().layer_patterns());
    summary.encoder_attention_gflops = report.attention_gflops;  // what `sparsevit flops` reports for the encoder
    summary.pruning_ratio = report.pruning_ratio;
    spdlog::info("policy {}: encoder {} ({} tokens, attention {}), {:.2f}M params; {} episodes, {} windows of {} "
                 "steps ({}x{} images -> {}), {} threads",
                 c.data_path, c.model, vc.num_tokens(), report.mask.empty() ? report.backend : report.mask,
                 summary.params / 1e6, summary.episodes, summary.windows, c.pred_horizon, demos->image_height,
                 demos->image_width, model->image_size(), process.threads());
  } else {
    spdlog::info("policy {}: low-dim (agent position + block pose, no encoder), {:.2f}M params; {} episodes, {} "
                 "windows of {} steps, {} threads",
                 c.data_path, summary.params / 1e6, summary.episodes, summary.windows, c.pred_horizon,
                 process.threads());
  }

  train::OptimizationOptions opt = optimization_options(c, world);
  opt.betas = {0.95, 0.999};
  opt.no_weight_decay_names = {};
  opt.model_ema = c.model_ema;
  opt.model_ema_decay = c.model_ema_decay;
  opt.model_ema_warmup = train::EmaWarmup{};
  if (c.layer_decay < 1) {
    if (!model->has_encoder()) throw UsageError("--layer_decay: a low-dim policy has no encoder");
    opt.layer_decay = c.layer_decay;  // MAE's param_groups_lrd over the encoder; readout and U-Net at lr
    opt.num_layers = model->encoder().config().depth + 1;
    opt.layer_prefix = "obs_encoder.";
  }
  train::TrainState state(*model, opt, process, ckpt ? &*ckpt : nullptr);
  PolicyTask task(*model);
  const int64_t start_epoch = ckpt ? state.start_epoch() : c.start_epoch;
  nlohmann::json metadata = models::model_description_json({std::nullopt, std::nullopt, description.model});
  metadata["world_size"] = world;
  metadata["config"] = config_to_json(c, kPolicy);
  if (!encoder_init.is_null()) metadata["encoder_init"] = encoder_init;
  std::optional<train::MetricsLog> metrics = open_run_outputs(c, kPolicy, process);
  // Validation on the episodes --max_train_samples leaves out, with the weights that are
  // evaluated (the EMA's when the run keeps one).
  std::optional<ValidationLoss> validation;
  const bool validate = c.val_batches > 0 && !mask.empty() && process.main_rank();
  if (validate) validation.emplace(demos, bo, episodes::complement(mask), c.val_batches, static_cast<uint64_t>(c.seed));
  double best_val = validate && ckpt ? best_recorded_val_loss(c.output_dir, start_epoch)
                                     : std::numeric_limits<double>::infinity();
  train::EpochHooks hooks;
  hooks.throughput_key = "train_samples_per_second";
  hooks.report = [&](int64_t, const train::EpochStats& stats) {
    task.take_auxiliary_means(&summary.reconstruction_loss, &summary.pose_loss);
    train::EpochReport r{
        {{"reconstruction_loss", summary.reconstruction_loss}},
        fmt::format("loss {:.4f}{}{}  lr {:.3g}", stats.loss,
                    c.crossway_weight > 0 ? fmt::format(" (reconstruction {:.4f})", summary.reconstruction_loss) : "",
                    c.pose_weight > 0 ? fmt::format(" (block pose {:.4f})", summary.pose_loss) : "", stats.lr)};
    if (c.pose_weight > 0) r.fields["pose_loss"] = summary.pose_loss;
    if (validation) {
      std::optional<train::EmaWeightsScope> ema_weights;
      if (state.ema()) ema_weights.emplace(*state.ema(), *model);
      const double val = (*validation)(*model);
      r.fields["val_loss"] = val;
      r.text += fmt::format("  val loss {:.4f}", val);
      if (val < best_val) {
        best_val = val;
        r.best = true;
        r.text += " (best)";
      }
    }
    return r;
  };
  const train::EpochsRun run = train::run_epochs(task, state, loader, process, start_epoch, epoch_checkpoints(c, std::move(metadata)),
                    metrics ? &*metrics : nullptr, hooks);
  summary.epochs_run = run.epochs;
  summary.first_epoch_loss = run.first_loss;
  summary.train_loss = run.last_loss;
  summary.checkpoint = run.checkpoint;
  // The policy to probe and evaluate: the best epoch by validation loss when there is one (its
  // EMA weights), else the last epoch's EMA weights, as Diffusion Policy evaluates.
  std::shared_ptr<policy::DiffusionPolicy> chosen = model;
  const std::string best_path = c.output_dir.empty() ? "" : c.output_dir + "/checkpoint-best.pt";
  std::optional<train::EmaWeightsScope> ema_weights;
  if (validate && std::isfinite(best_val) && std::filesystem::exists(best_path)) {
    const train::LoadedCheckpoint best(best_path);
    chosen = load_checkpoint_policy(best);
    summary.validated = true;
    summary.best_val_loss = best_val;
    summary.best_epoch = best.record().epoch;
    summary.evaluated_checkpoint = best_path;
  } else if ((c.eval_episodes > 0 || c.probe_batches > 0 || c.eval_train_episodes > 0) && process.main_rank() &&
             state.ema()) {
    ema_weights.emplace(*state.ema(), *model);
  }
  if (c.probe_batches > 0 && process.main_rank() && chosen->has_encoder()) {
    policy::ImageProbeOptions po;
    po.batches = c.probe_batches;
    po.batch_size = c.batch_size;
    po.seed = static_cast<uint64_t>(c.seed);
    // Episodes the run did not train on when --max_train_samples left some out.
    const bool held_out = !mask.empty();
    if (held_out) po.first_episode = c.max_train_samples;
    summary.probe = policy::probe_images(*chosen, demos, po, held_out);
    summary.probed = true;
  }
  if (c.eval_episodes > 0 && process.main_rank()) {
    PolicyEvalOptions eo;
    eo.episodes = c.eval_episodes;
    eo.first_seed = c.eval_seed;
    eo.observation_image_size = demos->image_height;
    eo.save_video = c.save_video;
    summary.eval = evaluate_policy(*chosen, eo, process.out());
    summary.evaluated = true;
    if (!c.output_dir.empty())
      write_file_atomically(c.output_dir + "/eval.json", summary.eval.to_json().dump(2) + "\n");
  }
  if (c.eval_train_episodes > 0 && process.main_rank()) {
    PolicyEvalOptions eo;
    eo.episodes = c.eval_train_episodes;
    eo.first_seed = 0;  // `policy collect --seed 0`: the demonstrations' seeds (minus the expert's rare failures)
    eo.observation_image_size = demos->image_height;
    summary.eval_train = evaluate_policy(*chosen, eo, process.out());
    summary.evaluated_train = true;
    if (!c.output_dir.empty())
      write_file_atomically(c.output_dir + "/eval_train.json", summary.eval_train.to_json().dump(2) + "\n");
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace sparsevit::pipelines
