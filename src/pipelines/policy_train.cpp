#include "pipelines/policy_train.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/attention_report.h"
#include "episodes/episode_file.h"
#include "episodes/zarr_replay_buffer.h"
#include "models/vision_transformer.h"
#include "pipelines/policy_checkpoint.h"
#include "pipelines/run_setup.h"
#include "policy/episode_batches.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/metrics_log.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::pipelines {
namespace {

class PolicyTask : public train::TrainTask {
 public:
  explicit PolicyTask(policy::DiffusionPolicy& policy) : policy_(policy) {}
  at::Tensor loss(const data::Batch& batch, std::mt19937_64&) override {
    // The default generator: checkpoints save its state, so a resumed run draws the same noise.
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    const policy::PolicyLoss l =
        policy_.compute_loss(batch.images, batch.extras.at("agent_pos"), batch.extras.at("action"), gen);
    if (l.reconstruction.defined()) {
      reconstruction_sum_ += l.reconstruction.item<double>();
      ++batches_;
    }
    return l.total;
  }
  double attention_gflops_now() const override {
    return policy_.encoder_attention_gflops() * static_cast<double>(policy_.config().obs_horizon);
  }
  // Crossway's weighted loss averaged since the last call (0 without Crossway).
  double take_reconstruction_mean() {
    const double mean = batches_ ? reconstruction_sum_ / batches_ : 0.0;
    reconstruction_sum_ = 0;
    batches_ = 0;
    return mean;
  }

 private:
  policy::DiffusionPolicy& policy_;
  double reconstruction_sum_ = 0;
  int64_t batches_ = 0;
};

// DP's LinearNormalizer fit on every step of the demonstrations (actions; agent positions =
// state columns 0 and 1).
policy::PolicyNormalizers fit_normalizers(const episodes::EpisodeSet& set) {
  const int64_t n = set.steps();
  const at::Tensor state = at::from_blob(const_cast<float*>(set.state.data()), {n, set.state_dim}, at::kFloat);
  const at::Tensor action = at::from_blob(const_cast<float*>(set.action.data()), {n, set.action_dim}, at::kFloat);
  return {policy::ActionNormalizer::fit(action.clone()), policy::ActionNormalizer::fit(state.narrow(1, 0, 2).clone())};
}

}  // namespace

episodes::EpisodeSet read_demonstrations(const std::string& path) {
  if (path.empty())
    throw UsageError("policy train needs --data_path: demonstrations from `sparsevit policy collect` (.episodes) or "
                     "Diffusion Policy's pusht_cchi_v7_replay.zarr folder");
  if (!std::filesystem::exists(path)) throw UsageError("demonstrations '" + path + "' do not exist");
  return std::filesystem::is_directory(path) ? episodes::read_zarr_replay_buffer(path)
                                             : episodes::read_episode_file(path);
}

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
  nlohmann::json j = {{"train_loss", train_loss},
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
  if (probed) j["probe"] = probe.to_json();
  if (evaluated) {
    j["success_rate"] = eval.success_rate;
    j["mean_max_coverage"] = eval.mean_max_coverage;
    j["eval_episodes"] = static_cast<int64_t>(eval.episodes.size());
  }
  return j;
}

std::string PolicyTrainSummary::to_text() const {
  std::string s = fmt::format("policy: {} episodes, {} windows, {:.2f}M params, encoder attention {:.5f} GFLOPs/image "
                              "(pruning ratio {:.4f}); loss {:.4f} -> {:.4f} in {} epochs, {:.0f} s",
                              episodes, windows, params / 1e6, encoder_attention_gflops, pruning_ratio,
                              first_epoch_loss, train_loss, epochs_run, seconds);
  if (probed) s += "\n" + probe.to_table();
  if (evaluated)
    s += fmt::format("\nclosed loop: success {:.1f}% of {} episodes, mean max coverage {:.3f}", 100 * eval.success_rate,
                     eval.episodes.size(), eval.mean_max_coverage);
  return s;
}

PolicyTrainSummary run_policy_train(const TrainConfig& raw) {
  const auto t0 = std::chrono::steady_clock::now();
  TrainConfig c = resolve(raw, kPolicy);
  check_device(c.device);
  train::ProcessContext process({c.threads, c.seed, c.dist_backend, c.dist_url, c.dist_timeout});
  const int64_t world = process.world_size();

  auto demos = std::make_shared<episodes::EpisodeSet>(read_demonstrations(c.data_path));
  std::vector<bool> mask;
  if (c.max_train_samples > 0 && c.max_train_samples < demos->episodes()) {
    mask.assign(static_cast<std::size_t>(demos->episodes()), false);
    for (int64_t e = 0; e < c.max_train_samples; ++e) mask[static_cast<std::size_t>(e)] = true;
  }
  std::optional<train::LoadedCheckpoint> ckpt;
  if (!c.resume.empty()) ckpt.emplace(c.resume);
  const PolicyDescription description = policy_description(c, demos->image_height);
  auto model = std::make_shared<policy::DiffusionPolicy>(description.config);
  if (!ckpt) model->set_normalizers(fit_normalizers(*demos));  // a resumed run restores them

  policy::EpisodeBatchOptions bo;
  bo.obs_horizon = c.obs_horizon;
  bo.pred_horizon = c.pred_horizon;
  bo.action_horizon = c.action_horizon;
  bo.image_size = model->image_size();
  bo.batch_size = c.batch_size;
  bo.seed = static_cast<uint64_t>(c.seed);
  bo.rank = process.rank();
  bo.world_size = world;
  policy::EpisodeBatchSource loader(demos, bo, mask);
  if (loader.num_batches() == 0) throw UsageError("the demonstrations have fewer windows than one batch");

  PolicyTrainSummary summary;
  summary.rank = process.rank();
  summary.world_size = world;
  summary.episodes = mask.empty() ? demos->episodes() : c.max_train_samples;
  summary.windows = loader.num_windows();
  for (const auto& p : model->parameters())
    if (p.requires_grad()) summary.params += p.numel();
  const models::VitConfig& vc = model->encoder().config();
  const analysis::AttentionReport report =
      analysis::attention_report(vc.attention, vc.attention_geometry(), model->encoder().layer_patterns());
  summary.encoder_attention_gflops = report.attention_gflops;  // what `sparsevit flops` reports for the encoder
  summary.pruning_ratio = report.pruning_ratio;
  spdlog::info("policy {}: encoder {} ({} tokens, attention {}), {:.2f}M params; {} episodes, {} windows of {} steps "
               "({}x{} images -> {}), {} threads",
               c.data_path, c.model, vc.num_tokens(), report.mask.empty() ? report.backend : report.mask, summary.params / 1e6, summary.episodes,
               summary.windows, c.pred_horizon, demos->image_height, demos->image_width, model->image_size(),
               process.threads());

  train::OptimizationOptions opt = optimization_options(c, world);
  opt.betas = {0.95, 0.999};
  opt.no_weight_decay_names = {};
  opt.model_ema = c.model_ema;
  opt.model_ema_decay = c.model_ema_decay;
  opt.model_ema_warmup = train::EmaWarmup{};
  train::TrainState state(*model, opt, process, ckpt ? &*ckpt : nullptr);
  PolicyTask task(*model);
  const int64_t start_epoch = ckpt ? state.start_epoch() : c.start_epoch;
  nlohmann::json metadata = models::model_description_json({std::nullopt, std::nullopt, description.model});
  metadata["world_size"] = world;
  metadata["config"] = config_to_json(c, kPolicy);
  std::optional<train::MetricsLog> metrics = open_run_outputs(c, kPolicy, process);
  train::EpochHooks hooks;
  hooks.throughput_key = "train_samples_per_second";
  hooks.report = [&](int64_t, const train::EpochStats& stats) {
    summary.reconstruction_loss = task.take_reconstruction_mean();
    return train::EpochReport{
        {{"reconstruction_loss", summary.reconstruction_loss}},
        fmt::format("loss {:.4f}{}  lr {:.3g}", stats.loss,
                    c.crossway_weight > 0 ? fmt::format(" (reconstruction {:.4f})", summary.reconstruction_loss) : "",
                    stats.lr)};
  };
  const train::EpochsRun run = train::run_epochs(task, state, loader, process, start_epoch, epoch_checkpoints(c, std::move(metadata)),
                    metrics ? &*metrics : nullptr, hooks);
  summary.epochs_run = run.epochs;
  summary.first_epoch_loss = run.first_loss;
  summary.train_loss = run.last_loss;
  summary.checkpoint = run.checkpoint;
  std::optional<train::EmaWeightsScope> ema_weights;  // Diffusion Policy evaluates the EMA policy
  if ((c.eval_episodes > 0 || c.probe_batches > 0) && process.main_rank() && state.ema())
    ema_weights.emplace(*state.ema(), *model);
  if (c.probe_batches > 0 && process.main_rank()) {
    policy::ImageProbeOptions po;
    po.batches = c.probe_batches;
    po.batch_size = c.batch_size;
    po.seed = static_cast<uint64_t>(c.seed);
    // Episodes the run did not train on when --max_train_samples left some out.
    const bool held_out = !mask.empty();
    if (held_out) po.first_episode = c.max_train_samples;
    summary.probe = policy::probe_images(*model, demos, po, held_out);
    summary.probed = true;
  }
  if (c.eval_episodes > 0 && process.main_rank()) {
    PolicyEvalOptions eo;
    eo.episodes = c.eval_episodes;
    eo.first_seed = c.eval_seed;
    eo.observation_image_size = demos->image_height;
    eo.save_video = c.save_video;
    summary.eval = evaluate_policy(*model, eo, process.out());
    summary.evaluated = true;
    if (!c.output_dir.empty())
      write_file_atomically(c.output_dir + "/eval.json", summary.eval.to_json().dump(2) + "\n");
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace sparsevit::pipelines
