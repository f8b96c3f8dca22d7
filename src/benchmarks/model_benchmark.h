// The whole-model benchmark behind `sparsevit bench --model NAME`: a ViT with dense attention and
// the same ViT with an attention config, timed side by side in one run — inference forward, or a
// full training step (forward, label-smoothed cross entropy, backward, AdamW step) as `finetune`
// runs it, on random in-memory batches (so data loading is not measured). Video models
// (timesformer_*): clips [B, C, T, H, W], dense spatial attention vs the config's, the temporal
// attention the same in both (dense, or --temporal-attn-cfg).
//
// Timing: every repeat runs both models back to back, the order alternating every repeat, so
// machine noise hits both alike, and each timed step follows an untimed step of the same model; each figure is the median of `repeats` after `warmup` untimed
// steps. Memory: peak bytes of CPU tensors allocated above what was live before one extra untimed
// step (activations, gradients, optimizer temporaries; benchmarks/cpu_memory_tracker.h).
// `breakdown` adds, per model, the share of a step's time per part (op_profiler.h) over extra
// profiled steps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/attention_spec.h"
#include "models/video_attention_layout.h"

namespace sparsevit::benchmarks {

struct ModelBenchmarkOptions {
  std::string model;                   // registry name, e.g. vit_nano_patch2_28
  std::string attn_cfg;                // "" : the built-in Fibottention default
  std::vector<std::string> overrides;  // NAME=VALUE mask kwargs
  std::optional<int64_t> input_size, patch_size, embed_dim, depth, num_heads;  // shape overrides
  // Video models only (set on an image model: UsageError). Unset: the model's frames, divided
  // space-time attention, dense temporal attention.
  std::optional<int64_t> num_frames;          // 0: the model's
  std::optional<std::string> attention_type;  // divided_space_time | space_only | joint_space_time
  std::string temporal_attn_cfg;              // divided_space_time's temporal attention config
  int32_t batch = 128;
  bool backward = false;               // a training step instead of an inference forward
  std::string amp = "none";            // none | bf16 (autocast: GEMMs in bfloat16)
  int32_t threads = 0;                 // 0: every core
  int32_t repeats = 10;
  int32_t warmup = 2;
  bool breakdown = false;
  int32_t profile_steps = 3;
  double max_dense_gib = 16.0;         // skip the dense model above this estimate of its N x N buffers
  bool malloc_cache = true;
  uint64_t seed = 0;
};

// Attention GFLOPs per clip of a video model as analysis::video_attention_report counts them (the
// numbers `sparsevit flops` prints). The caller fills them from the result's specs and layout
// (`sparsevit bench` does): the sparsevit_benchmarks library does not link sparsevit_analysis.
struct VideoAttentionGflops {
  double spatial = 0, temporal = 0, total = 0;
};

struct ModelTiming {
  std::string name;  // dense | sparse
  std::string attention;
  bool ran = false;
  double median_ms = 0, min_ms = 0;
  std::vector<double> step_ms;  // every timed step, in order
  double samples_per_second = 0;  // images/s; clips/s for a video model
  int64_t peak_extra_bytes = 0;
  double attention_gflops = 0;  // per image (clip), forward, as the model's modules compute it
  std::optional<VideoAttentionGflops> video_gflops;
  double pruning_ratio = 0;
  // breakdown: part -> seconds per step, and the step's wall time while profiled
  std::map<std::string, double> part_seconds;
  std::map<std::string, double> op_seconds;  // the ops behind the parts (top ones in the report)
  double profiled_step_seconds = 0;
};

struct ModelBenchmarkResult {
  ModelBenchmarkOptions options;
  std::string config;
  int threads = 1;
  int64_t tokens = 0, params = 0;  // tokens: of one attention sequence (a frame's, + class token)
  ModelTiming dense, sparse;
  // What the sparse model's attention is built from; for a video model, also its temporal
  // attention and how the attentions see a clip (the dense model shares both).
  config::AttentionSpec spec, temporal_spec;
  std::optional<models::VideoAttentionLayout> video_layout;
  bool is_video() const { return video_layout.has_value(); }
  double speedup() const {
    return dense.ran && sparse.ran && sparse.median_ms > 0 ? dense.median_ms / sparse.median_ms : 0.0;
  }

  nlohmann::json to_json() const;
  std::string to_text() const;

 private:
  std::string video_text() const;
};

ModelBenchmarkResult run_model_benchmark(const ModelBenchmarkOptions& options);

}  // namespace sparsevit::benchmarks
