// Weights in and out of a model by timm's / MAE's parameter names (patch_embed.proj.weight,
// cls_token, pos_embed, blocks.0.attn.qkv.weight, ..., head.weight): what `finetune --finetune`,
// `predict --weights` and `export` share.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "weights/named_tensors.h"

namespace sparsevit::models {
class Classifier;
}

namespace sparsevit::models {

// What load_pretrained did, for the log (MAE prints the same lists).
struct PretrainedLoad {
  std::vector<std::string> loaded;
  std::vector<std::string> missing;     // model parameters the file lacks (re-initialised or kept)
  std::vector<std::string> unexpected;  // file keys the model has no parameter for (decoder, ...)
  std::vector<std::string> removed;     // keys dropped on purpose (a head of another class count)
  bool head_reinitialised = false;
  bool pos_embed_interpolated = false;
  bool time_embed_resized = false;
  int64_t temporal_from_spatial = 0;  // temporal_attn / temporal_norm1 tensors copied from attn / norm1
};

// MAE main_finetune's --finetune: copies `weights` (timm / MAE names) into `model` by name.
// A head whose class count differs is removed and re-initialised as MAE does (trunc_normal,
// std 2e-5, bias 0); pos_embed is interpolated bicubically when the grid differs; decoder and
// other unknown keys are reported as unexpected; a missing head is re-initialised likewise.
// Any other shape mismatch is a UsageError naming the key and both shapes ("<source>: ...").
// Buffers (sparse patterns) are derived from the attention config and never loaded, except
// BatchNorm statistics (the conv stem's running_mean / running_var / num_batches_tracked).
// A prefix every key shares is dropped: "module." (DistributedDataParallel) and "model."
// (TimeSformer's wrapper). Video models (TimeSformer's load_pretrained): time_embed is
// resized (nearest) to the model's frames, and image weights initialise the temporal attention
// (temporal_attn from attn, temporal_norm1 from norm1) where the file has none; time_embed
// and temporal_fc then keep their zero init.
PretrainedLoad load_pretrained(models::Classifier& model, const weights::NamedTensors& weights, const std::string& source);

// `weights` without a prefix every key shares: "module." (DistributedDataParallel), then
// "model." (TimeSformer's wrapper module).
weights::NamedTensors without_wrapper_prefixes(weights::NamedTensors weights);

// Reads a weight file of any supported format (see weights/weight_file.h) and loads it.
PretrainedLoad load_pretrained_file(models::Classifier& model, const std::string& path);

// One readable summary line per list (missing / unexpected / removed), as MAE's msg.
std::string describe(const PretrainedLoad& load);

// The model's parameters by name (timm / MAE names) and its BatchNorm statistics: what `export`
// writes. Other buffers (the sparse patterns' CSR indices) are left out; they are rebuilt from
// the attention config.
weights::NamedTensors exported_parameters(const torch::nn::Module& model);

}  // namespace sparsevit::models
