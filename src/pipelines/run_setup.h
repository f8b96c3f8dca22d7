// What the pipelines share when they set a run up: the model options from the flags, the device check,
// the loader options of this process and the transform settings.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/attention_spec.h"
#include "data/data_loader.h"
#include "data/transforms.h"
#include "models/model_registry.h"
#include "pipelines/train_config.h"
#include "train/engine.h"
#include "train/epoch_loop.h"
#include "train/metrics_log.h"
#include "train/process_context.h"

namespace sparsevit::pipelines {

// The model options the flags ask for: --input_size, --patch_size/--embed_dim/--depth/--num_heads,
// --global_pool, --drop_path, --nb_classes (0: the model's); video models --num_frames,
// --attention_type and the temporal attention (`temporal`, dense by default).
models::ModelOptions vit_model_options(const TrainConfig& config, const config::AttentionSpec& spec,
                                       const config::AttentionSpec& temporal = {});

// --device: cpu runs; cuda is refused with the reason (this build trains on the CPU).
void check_device(const std::string& device);

// This process's shard of a split, in batches of the per-process batch size.
data::LoaderOptions loader_options(const TrainConfig& config, const train::ProcessContext& process);

// Transform settings for the dataset at the model's input: --train_crop, colour jitter,
// RandAugment and random erasing from the flags. Validated.
data::TransformConfig transform_config(const TrainConfig& config, int64_t input_size, int64_t in_chans);

// The engine options every pipeline takes from the flags: lr (from blr and the global batch
// unless --lr), schedule, AdamW's decay and epsilon, clipping, accumulation, epochs, gradient
// averaging, the host seed, progress lines. Pipelines add their own (betas, layer decay, EMA).
train::OptimizationOptions optimization_options(const TrainConfig& config, int64_t world_size);

// What a run writes before its first epoch (rank 0 only): output_dir/config.json with the fields
// of `command`, and the metrics log in log_dir (nullopt when there is none to write).
std::optional<train::MetricsLog> open_run_outputs(const TrainConfig& config, unsigned command, const train::ProcessContext& process);

// Where the epoch loop saves (--output_dir, --save_ckpt_freq) and what every checkpoint's
// metadata holds besides the engine's counters.
train::EpochCheckpoints epoch_checkpoints(const TrainConfig& config, nlohmann::json metadata);

}  // namespace sparsevit::pipelines
