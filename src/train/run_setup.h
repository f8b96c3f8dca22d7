// What main_finetune and main_pretrain share when they set a run up: the attention config (read
// once, its text kept for the checkpoint), the model options from the flags, the device check,
// the loader options of this process and the transform settings.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "config/attention_spec.h"
#include "data/data_loader.h"
#include "data/transforms.h"
#include "models/model_registry.h"
#include "train/engine.h"
#include "train/metrics_log.h"
#include "train/process_context.h"
#include "train/train_config.h"

namespace sparsevit::train {

// An attention config as the run uses it: the YAML text (travels in checkpoints) and the spec.
struct AttentionConfig {
  std::string yaml;
  config::AttentionSpec spec;
};

// Reads `path` once ("" : the built-in Fibottention default) and applies NAME=VALUE overrides.
// A missing file is a UsageError naming it.
AttentionConfig load_attention_config(const std::string& path, const std::vector<std::string>& overrides);

// The model options the flags ask for: --input_size, --patch_size/--embed_dim/--depth/--num_heads,
// --global_pool, --drop_path, --nb_classes (0: the model's); video models --num_frames,
// --attention_type and the temporal attention (`temporal`, dense by default).
models::ModelOptions vit_model_options(const TrainConfig& config, const config::AttentionSpec& spec,
                                       const config::AttentionSpec& temporal = {});

// --device: cpu runs; cuda is refused with the reason (this build trains on the CPU).
void check_device(const std::string& device);

// This process's shard of a split, in batches of the per-process batch size.
data::LoaderOptions loader_options(const TrainConfig& config, const ProcessContext& process);

// Transform settings for the dataset at the model's input: --train_crop, colour jitter,
// RandAugment and random erasing from the flags. Validated.
data::TransformConfig transform_config(const TrainConfig& config, int64_t input_size, int64_t in_chans);

// The engine options every pipeline takes from the flags: lr (from blr and the global batch
// unless --lr), schedule, AdamW's decay and epsilon, clipping, accumulation, epochs, gradient
// averaging, the host seed, progress lines. Pipelines add their own (betas, layer decay, EMA).
OptimizationOptions optimization_options(const TrainConfig& config, int64_t world_size);

// What a run writes before its first epoch (rank 0 only): output_dir/config.json with the fields
// of `command`, and the metrics log in log_dir (nullopt when there is none to write).
std::optional<MetricsLog> open_run_outputs(const TrainConfig& config, unsigned command, const ProcessContext& process);

// After an epoch (rank 0, with an output_dir): checkpoint.pt, and checkpoint-<epoch>.pt every
// --save_ckpt_freq epochs. Returns the path of checkpoint.pt ("" when nothing was written).
std::string save_epoch_checkpoints(const TrainState& state, const TrainConfig& config, int64_t epoch,
                                   const nlohmann::json& metadata, const ProcessContext& process);

}  // namespace sparsevit::train
