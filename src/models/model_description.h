// What a checkpoint says about the model it holds, so that eval, resume, predict, export, the
// analysis commands and Python's sparsevit.models.load rebuild exactly that model. This file is
// the only writer and reader of that JSON (checkpoint metadata, and the "sparsevit_model" entry
// of an exported safetensors file). Three kinds, as the pipelines write them:
//   classifier (finetune, video): top-level keys "model", "nb_classes", "model_shape",
//     "attention_yaml", "attention_source", "attention_overrides", "temporal_attention_yaml",
//     "dataset" (older checkpoints: "config"."dataset");
//   MAE (pretrain): the object under "mae";
//   diffusion policy: the object under "policy".
// docs/weights.md lists every key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/attention_spec.h"
#include "models/mae_registry.h"
#include "models/model_registry.h"

namespace sparsevit::models {

class Classifier;
class MaskedAutoencoder;

// An attention config as it travels with the weights: its YAML text and NAME=VALUE overrides.
struct AttentionDescription {
  std::string yaml;                    // "" : dense (only the temporal attention may be absent)
  std::vector<std::string> overrides;  // --attn_set / --attn-set
  config::AttentionSpec spec;          // parsed, overrides applied (set by the reader and by described())
};

// A ViT encoder's built shape. Zero where a checkpoint predates the field (the registered shape).
struct VitShapeDescription {
  int64_t img_size = 0, patch_size = 0, embed_dim = 0, depth = 0, num_heads = 0;
  bool global_pool = false;
  std::string stem = "patch";  // VitConfig::stem; written only when not "patch", absent reads as "patch"
};

struct ClassifierDescription {
  std::string model;        // timm name
  int64_t nb_classes = 0;
  std::optional<VitShapeDescription> shape;  // absent from the oldest checkpoints
  int64_t num_frames = 0;   // video models (TimeSformer); 0: an image model
  std::string attention_type = "divided_space_time";
  AttentionDescription attention;
  std::string attention_source;            // where the attention YAML was read from
  AttentionDescription temporal_attention; // yaml "" : dense
  std::string dataset;                     // the training dataset (its normalisation); "" : unknown
};

struct MaeDescription {
  std::string model;  // MAE registry name
  VitShapeDescription encoder;
  int64_t decoder_embed_dim = 0, decoder_depth = 0, decoder_num_heads = 0;
  double mask_ratio = 0.75;
  bool norm_pix_loss = false;
  AttentionDescription attention, decoder_attention;  // the overrides are shared
};

// The diffusion policy's network (policy/diffusion_policy.h) in plain fields.
struct PolicyModelDescription {
  std::string encoder_model;
  VitShapeDescription encoder;
  AttentionDescription attention;
  int64_t obs_horizon = 2, pred_horizon = 16, action_horizon = 8;
  std::string down_dims;  // "256,512,1024"
  int64_t step_embed_dim = 128, inference_steps = 100;
  double crossway_weight = 0;
  std::string crossway_input = "mid";  // | obs
  int64_t observation_image_size = 96;
  std::string obs_type = "image";   // | lowdim (older checkpoints: image)
  std::string obs_readout = "cls";  // | spatial_softmax | attention_pool | flatten (older checkpoints: cls)
  int64_t num_kp = 32;              // spatial_softmax keypoints
  int64_t obs_shift = 0;            // training-time random shift in pixels (older checkpoints: none)
  double pose_weight = 0;           // auxiliary block-pose loss weight (older checkpoints: none)
};

// One checkpoint's description: exactly one member is set.
struct ModelDescription {
  std::optional<ClassifierDescription> classifier;
  std::optional<MaeDescription> mae;
  std::optional<PolicyModelDescription> policy;
};

// The metadata entries of `description` (to merge into a checkpoint's metadata object).
nlohmann::json model_description_json(const ModelDescription& description);
// The description in `metadata` (a checkpoint's metadata object); nullopt when it holds none
// (e.g. written by other tools). RuntimeError "<context>: corrupt model description: ..." when
// a description is there but incomplete; attention configs are parsed (errors name `context`).
std::optional<ModelDescription> read_model_description(const nlohmann::json& metadata, const std::string& context);

// The description of a built classifier (shape, frames), with its attention configs and data.
ClassifierDescription describe_classifier(const Classifier& model, const std::string& name, AttentionDescription attention,
                                          AttentionDescription temporal_attention, const std::string& dataset);
// The description of a built MAE.
MaeDescription describe_mae(const MaskedAutoencoder& model, const std::string& name, AttentionDescription attention,
                            AttentionDescription decoder_attention);

// The options that rebuild the described model (drop path 0: for evaluation and resume).
ModelOptions model_options(const ClassifierDescription& description);
// The options that rebuild the described MAE.
MaeOptions mae_options(const MaeDescription& description);
// Shape fields into `options` (set where the description has them).
void apply_shape(const VitShapeDescription& shape, ModelOptions& options);

}  // namespace sparsevit::models
