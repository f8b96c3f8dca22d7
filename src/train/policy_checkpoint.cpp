#include "train/policy_checkpoint.h"

#include <nlohmann/json.hpp>

#include "train/checkpoint.h"
#include "train/model_ema.h"
#include "train/run_setup.h"
#include "util/errors.h"

namespace sparsevit::train {
namespace {

constexpr const char* kPolicyKey = "policy";

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
  p.crossway_input = c.crossway_input == "obs" ? policy::CrosswayInput::kObsFeatures : policy::CrosswayInput::kUnetMid;
  return p;
}

}  // namespace

PolicyDescription policy_description(const TrainConfig& c, int64_t observation_image_size) {
  PolicyDescription d;
  const AttentionConfig attention = load_attention_config(c.attn_cfg, c.attn_set);
  d.attention_yaml = attention.yaml;
  d.attention_overrides = c.attn_set;
  d.observation_image_size = observation_image_size;
  d.config = policy_config(c, attention.spec);
  return d;
}

nlohmann::json policy_description_json(const PolicyDescription& d) {
  const policy::DiffusionPolicyConfig& p = d.config;
  const models::ModelOptions& e = p.encoder;
  return {{"encoder_model", p.encoder_model},
          {"img_size", e.img_size.value_or(0)},
          {"patch_size", e.patch_size.value_or(0)},
          {"embed_dim", e.embed_dim.value_or(0)},
          {"depth", e.depth.value_or(0)},
          {"num_heads", e.num_heads.value_or(0)},
          {"global_pool", e.global_pool},
          {"attention_yaml", d.attention_yaml},
          {"attention_overrides", d.attention_overrides},
          {"obs_horizon", p.obs_horizon},
          {"pred_horizon", p.pred_horizon},
          {"action_horizon", p.action_horizon},
          {"down_dims", down_dims_text(p.down_dims)},
          {"step_embed_dim", p.step_embed_dim},
          {"inference_steps", p.inference_steps},
          {"crossway_weight", p.crossway_weight},
          {"crossway_input", p.crossway_input == policy::CrosswayInput::kObsFeatures ? "obs" : "mid"},
          {"observation_image_size", d.observation_image_size}};
}

std::optional<PolicyDescription> checkpoint_policy(const LoadedCheckpoint& ckpt) {
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json(), nullptr, false);
  if (!meta.is_object() || !meta.contains(kPolicyKey)) return std::nullopt;
  try {
    const nlohmann::json& m = meta.at(kPolicyKey);
    TrainConfig c;
    c.model = m.at("encoder_model").get<std::string>();
    c.input_size = m.at("img_size").get<int64_t>();
    c.patch_size = m.at("patch_size").get<int64_t>();
    c.embed_dim = m.at("embed_dim").get<int64_t>();
    c.depth = m.at("depth").get<int64_t>();
    c.num_heads = m.at("num_heads").get<int64_t>();
    c.global_pool = m.at("global_pool").get<bool>();
    c.drop_path = 0;
    c.obs_horizon = m.at("obs_horizon").get<int64_t>();
    c.pred_horizon = m.at("pred_horizon").get<int64_t>();
    c.action_horizon = m.at("action_horizon").get<int64_t>();
    c.down_dims = m.at("down_dims").get<std::string>();
    c.step_embed_dim = m.at("step_embed_dim").get<int64_t>();
    c.inference_steps = m.at("inference_steps").get<int64_t>();
    c.crossway_weight = m.at("crossway_weight").get<double>();
    c.crossway_input = m.at("crossway_input").get<std::string>();
    PolicyDescription d;
    d.attention_yaml = m.at("attention_yaml").get<std::string>();
    d.attention_overrides = m.at("attention_overrides").get<std::vector<std::string>>();
    config::AttentionSpec spec = config::parse_attention_spec(d.attention_yaml, ckpt.path() + " (attention)");
    config::apply_mask_kwarg_overrides(spec, d.attention_overrides);
    d.observation_image_size = m.at("observation_image_size").get<int64_t>();
    d.config = policy_config(c, spec);
    return d;
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(ckpt.path() + ": corrupt policy description: " + e.what());
  }
}

std::shared_ptr<policy::DiffusionPolicy> load_checkpoint_policy(const LoadedCheckpoint& ckpt,
                                                                PolicyDescription* description) {
  const std::optional<PolicyDescription> d = checkpoint_policy(ckpt);
  if (!d) throw RuntimeError(ckpt.path() + " holds no diffusion policy (train one with `sparsevit policy train`)");
  auto model = std::make_shared<policy::DiffusionPolicy>(d->config);
  ckpt.load_model(*model);
  if (ckpt.has_ema()) {
    ModelEma ema(*model);
    ckpt.load_ema(ema);
    ema.copy_to(*model);
  }
  if (description) *description = *d;
  return model;
}

}  // namespace sparsevit::train
