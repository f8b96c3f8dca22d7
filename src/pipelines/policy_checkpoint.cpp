#include "pipelines/policy_checkpoint.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "pipelines/checkpoint_model.h"
#include "pipelines/run_setup.h"
#include "train/checkpoint.h"
#include "train/model_ema.h"
#include "util/errors.h"

namespace sparsevit::pipelines {
namespace {

std::string down_dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

// The policy's network from the policy fields of `c` and the encoder's attention.
policy::DiffusionPolicyConfig policy_config(const TrainConfig& c, const config::AttentionSpec& attention) {
  policy::DiffusionPolicyConfig p;
  p.encoder_model = c.model;
  p.encoder = vit_model_options(c, attention);
  p.obs_horizon = c.obs_horizon;
  p.pred_horizon = c.pred_horizon;
  p.action_horizon = c.action_horizon;
  p.down_dims = policy::parse_dims(c.down_dims, "down_dims");
  p.step_embed_dim = c.step_embed_dim;
  p.inference_steps = c.inference_steps;
  p.crossway_weight = c.crossway_weight;
  p.pose_weight = c.pose_weight;
  p.crossway_input = c.crossway_input == "obs" ? policy::CrosswayInput::kObsFeatures : policy::CrosswayInput::kUnetMid;
  p.readout.kind = policy::parse_observation_readout(c.obs_readout);
  p.readout.num_kp = c.num_kp;
  p.obs_shift = c.obs_shift;
  p.observation = policy::parse_policy_observation(c.obs_type);
  return p;
}

}  // namespace

PolicyDescription policy_description(const TrainConfig& c, int64_t observation_image_size) {
  const config::AttentionConfig attention = config::load_attention_config(c.attn_cfg, c.attn_set);
  PolicyDescription d;
  d.config = policy_config(c, attention.spec);
  models::PolicyModelDescription& m = d.model;
  const policy::DiffusionPolicyConfig& p = d.config;
  const models::ModelOptions& e = p.encoder;  // the flags' shape overrides (0: the registered shape)
  m.encoder_model = p.encoder_model;
  m.encoder = {e.img_size.value_or(0), e.patch_size.value_or(0), e.embed_dim.value_or(0),
               e.depth.value_or(0),    e.num_heads.value_or(0),  e.global_pool, e.stem};
  m.attention = {attention.yaml, c.attn_set, attention.spec};
  m.obs_horizon = p.obs_horizon;
  m.pred_horizon = p.pred_horizon;
  m.action_horizon = p.action_horizon;
  m.down_dims = down_dims_text(p.down_dims);
  m.step_embed_dim = p.step_embed_dim;
  m.inference_steps = p.inference_steps;
  m.crossway_weight = p.crossway_weight;
  m.pose_weight = p.pose_weight;
  m.crossway_input = p.crossway_input == policy::CrosswayInput::kObsFeatures ? "obs" : "mid";
  m.observation_image_size = observation_image_size;
  m.obs_readout = c.obs_readout;
  m.num_kp = p.readout.num_kp;
  m.obs_shift = p.obs_shift;
  m.obs_type = c.obs_type;
  return d;
}

std::optional<PolicyDescription> checkpoint_policy(const train::LoadedCheckpoint& ckpt) {
  const std::optional<models::ModelDescription> described = checkpoint_description(ckpt);
  if (!described || !described->policy) return std::nullopt;
  PolicyDescription d;
  d.model = *described->policy;
  const models::PolicyModelDescription& m = d.model;
  TrainConfig c;  // the flags that would build this policy
  c.model = m.encoder_model;
  c.input_size = m.encoder.img_size;
  c.patch_size = m.encoder.patch_size;
  c.embed_dim = m.encoder.embed_dim;
  c.depth = m.encoder.depth;
  c.num_heads = m.encoder.num_heads;
  c.global_pool = m.encoder.global_pool;
  c.stem = m.encoder.stem;
  c.drop_path = 0;
  c.obs_horizon = m.obs_horizon;
  c.pred_horizon = m.pred_horizon;
  c.action_horizon = m.action_horizon;
  c.down_dims = m.down_dims;
  c.step_embed_dim = m.step_embed_dim;
  c.inference_steps = m.inference_steps;
  c.crossway_weight = m.crossway_weight;
  c.pose_weight = m.pose_weight;
  c.crossway_input = m.crossway_input;
  c.obs_readout = m.obs_readout;
  c.num_kp = m.num_kp;
  c.obs_shift = m.obs_shift;
  c.obs_type = m.obs_type;
  d.config = policy_config(c, m.attention.spec);
  return d;
}

std::shared_ptr<policy::DiffusionPolicy> load_checkpoint_policy(const train::LoadedCheckpoint& ckpt,
                                                                PolicyDescription* description) {
  const std::optional<PolicyDescription> d = checkpoint_policy(ckpt);
  if (!d) throw RuntimeError(ckpt.path() + " holds no diffusion policy (train one with `sparsevit policy train`)");
  auto model = std::make_shared<policy::DiffusionPolicy>(d->config);
  ckpt.load_model(*model);
  if (ckpt.has_ema()) {
    train::ModelEma ema(*model);
    ckpt.load_ema(ema);
    ema.copy_to(*model);
  }
  if (description) *description = *d;
  return model;
}

int64_t export_policy_weights(const std::string& checkpoint, const std::string& output) {
  const train::LoadedCheckpoint ckpt(checkpoint);
  const auto model = load_checkpoint_policy(ckpt);
  train::CheckpointContents c;
  c.model = model.get();
  c.epoch = ckpt.epoch();
  c.global_step = ckpt.global_step();
  c.save_torch_rng = false;
  c.metadata_json = ckpt.metadata_json();
  train::save_checkpoint(output, c);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(output, ec);
  return ec ? -1 : static_cast<int64_t>(bytes);
}

}  // namespace sparsevit::pipelines
