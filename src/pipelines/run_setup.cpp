#include "pipelines/run_setup.h"

#include <torch/cuda.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::pipelines {

models::ModelOptions vit_model_options(const TrainConfig& c, const config::AttentionSpec& spec,
                                       const config::AttentionSpec& temporal) {
  models::ModelOptions o;
  if (c.nb_classes > 0) o.num_classes = c.nb_classes;
  if (c.input_size > 0) o.img_size = c.input_size;
  if (c.patch_size > 0) o.patch_size = c.patch_size;
  if (c.embed_dim > 0) o.embed_dim = c.embed_dim;
  if (c.depth > 0) o.depth = c.depth;
  if (c.num_heads > 0) o.num_heads = c.num_heads;
  o.global_pool = c.global_pool;
  o.stem = c.stem;
  o.drop_path_rate = c.drop_path;
  o.attention = spec;
  if (c.num_frames > 0) o.num_frames = c.num_frames;
  o.attention_type = c.attention_type;
  o.temporal_attention = temporal;
  return o;
}

void check_device(const std::string& device) {
  if (device == "cpu") return;
  throw UsageError("--device " + device + ": sparsevit trains on the CPU in this version" +
                   (torch::cuda::is_available() ? "" : " (and this LibTorch build has no CUDA)") + "; use --device cpu");
}

data::LoaderOptions loader_options(const TrainConfig& c, const train::ProcessContext& process) {
  data::LoaderOptions o;
  o.batch_size = c.batch_size;
  o.num_workers = c.num_workers;
  o.seed = static_cast<uint64_t>(c.seed);
  o.rank = process.rank();
  o.world_size = process.world_size();
  return o;
}

data::TransformConfig transform_config(const TrainConfig& c, int64_t input_size, int64_t in_chans) {
  data::TransformConfig tc = data::transform_config_for(c.dataset, input_size, in_chans);
  tc.train_crop = c.train_crop;
  tc.color_jitter = c.color_jitter;
  tc.auto_augment = c.aa;
  tc.re_prob = c.reprob;
  tc.re_mode = c.remode;
  tc.re_count = c.recount;
  data::validate(tc);
  return tc;
}

train::OptimizationOptions optimization_options(const TrainConfig& c, int64_t world) {
  train::OptimizationOptions o;
  // MAE: eff_batch_size = batch_size * accum_iter * world_size; lr = blr * eff_batch_size / 256.
  o.lr = c.lr > 0 ? c.lr : train::effective_lr(c.blr, c.batch_size * c.accum_iter * world);
  o.min_lr = c.min_lr;
  o.warmup_epochs = c.warmup_epochs;
  o.weight_decay = c.weight_decay;
  o.opt_eps = c.opt_eps;
  o.clip_grad = c.clip_grad;
  o.accum_iter = c.accum_iter;
  o.epochs = c.epochs;
  o.dist_bucket_mb = c.dist_bucket_mb;
  o.dist_no_overlap = c.dist_no_overlap;
  o.host_seed = static_cast<uint64_t>(c.seed);
  o.print_freq = c.print_freq;
  o.amp_bf16 = c.amp == "bf16";
  return o;
}

std::optional<train::MetricsLog> open_run_outputs(const TrainConfig& c, unsigned command, const train::ProcessContext& process) {
  if (!process.main_rank()) return std::nullopt;
  if (!c.output_dir.empty()) {
    std::filesystem::create_directories(c.output_dir);
    write_file_atomically(c.output_dir + "/config.json", config_to_json(c, command).dump(2) + "\n");
  }
  if (c.log_dir.empty()) return std::nullopt;
  std::filesystem::create_directories(c.log_dir);
  return train::MetricsLog(c.log_dir + "/metrics.jsonl");
}

train::EpochCheckpoints epoch_checkpoints(const TrainConfig& c, nlohmann::json metadata) {
  train::EpochCheckpoints checkpoints;
  checkpoints.output_dir = c.output_dir;
  checkpoints.save_ckpt_freq = c.save_ckpt_freq;
  checkpoints.metadata = std::move(metadata);
  return checkpoints;
}

}  // namespace sparsevit::pipelines
