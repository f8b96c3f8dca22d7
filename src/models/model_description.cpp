#include "models/model_description.h"

#include <nlohmann/json.hpp>

#include "models/classifier.h"
#include "models/masked_autoencoder.h"
#include "models/timesformer.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

constexpr const char* kMaeKey = "mae";
constexpr const char* kPolicyKey = "policy";

nlohmann::json shape_json(const VitShapeDescription& s) {
  nlohmann::json j = {{"img_size", s.img_size}, {"patch_size", s.patch_size}, {"embed_dim", s.embed_dim},
                      {"depth", s.depth},       {"num_heads", s.num_heads},   {"global_pool", s.global_pool}};
  // Only the non-default stem: descriptions of patchify models stay as they always were.
  if (s.stem != "patch") j["stem"] = s.stem;
  return j;
}

// `with_pool`: MAE's description has no global_pool (its encoder pools nothing).
VitShapeDescription read_shape(const nlohmann::json& j, bool with_pool) {
  VitShapeDescription s;
  s.img_size = j.at("img_size").get<int64_t>();
  s.patch_size = j.at("patch_size").get<int64_t>();
  s.embed_dim = j.at("embed_dim").get<int64_t>();
  s.depth = j.at("depth").get<int64_t>();
  s.num_heads = j.at("num_heads").get<int64_t>();
  if (with_pool) s.global_pool = j.at("global_pool").get<bool>();
  s.stem = j.value("stem", std::string("patch"));  // absent before the conv stem: patchify
  return s;
}

VitShapeDescription shape_of(const VitConfig& c) {
  return {c.img_size, c.patch_size, c.embed_dim, c.depth, c.num_heads, c.global_pool, c.stem};
}

// Parses `a.yaml` (dense when empty) and applies `a.overrides`.
void parse(AttentionDescription& a, const std::string& context, bool apply_overrides = true) {
  a.spec = a.yaml.empty() ? config::AttentionSpec{} : config::parse_attention_spec(a.yaml, context);
  if (apply_overrides) config::apply_mask_kwarg_overrides(a.spec, a.overrides);
}

ClassifierDescription read_classifier(const nlohmann::json& meta) {
  ClassifierDescription m;
  m.model = meta.at("model").get<std::string>();
  m.nb_classes = meta.value("nb_classes", int64_t{0});
  m.attention.yaml = meta.at("attention_yaml").get<std::string>();
  m.attention.overrides = meta.value("attention_overrides", std::vector<std::string>{});
  m.attention_source = meta.value("attention_source", std::string());
  if (meta.contains("model_shape")) {
    const nlohmann::json& shape = meta.at("model_shape");
    m.shape = read_shape(shape, /*with_pool=*/true);
    m.num_frames = shape.value("num_frames", int64_t{0});
    m.attention_type = shape.value("attention_type", std::string("divided_space_time"));
  }
  m.temporal_attention.yaml = meta.value("temporal_attention_yaml", std::string());
  if (meta.contains("dataset")) {
    m.dataset = meta.at("dataset").get<std::string>();
  } else if (meta.contains("config") && meta.at("config").contains("dataset")) {  // before "dataset" was written
    m.dataset = meta.at("config").at("dataset").get<std::string>();
  }
  return m;
}

nlohmann::json classifier_json(const ClassifierDescription& m) {
  nlohmann::json j = {{"model", m.model},
                      {"nb_classes", m.nb_classes},
                      {"attention_yaml", m.attention.yaml},
                      {"attention_source", m.attention_source},
                      {"attention_overrides", m.attention.overrides},
                      {"temporal_attention_yaml", m.temporal_attention.yaml},
                      {"dataset", m.dataset}};
  if (m.shape) {
    j["model_shape"] = shape_json(*m.shape);
    if (m.num_frames > 0) {
      j["model_shape"]["num_frames"] = m.num_frames;
      j["model_shape"]["attention_type"] = m.attention_type;
    }
  }
  return j;
}

MaeDescription read_mae(const nlohmann::json& m) {
  MaeDescription d;
  d.model = m.at("model").get<std::string>();
  d.encoder = read_shape(m, /*with_pool=*/false);
  d.decoder_embed_dim = m.at("decoder_embed_dim").get<int64_t>();
  d.decoder_depth = m.at("decoder_depth").get<int64_t>();
  d.decoder_num_heads = m.at("decoder_num_heads").get<int64_t>();
  d.mask_ratio = m.at("mask_ratio").get<double>();
  d.norm_pix_loss = m.at("norm_pix_loss").get<bool>();
  d.attention.yaml = m.at("attention_yaml").get<std::string>();
  d.decoder_attention.yaml = m.at("decoder_attention_yaml").get<std::string>();
  d.attention.overrides = m.at("attention_overrides").get<std::vector<std::string>>();
  d.decoder_attention.overrides = d.attention.overrides;
  return d;
}

nlohmann::json mae_json(const MaeDescription& d) {
  nlohmann::json j = shape_json(d.encoder);
  j.erase("global_pool");
  j["model"] = d.model;
  j["decoder_embed_dim"] = d.decoder_embed_dim;
  j["decoder_depth"] = d.decoder_depth;
  j["decoder_num_heads"] = d.decoder_num_heads;
  j["mask_ratio"] = d.mask_ratio;
  j["norm_pix_loss"] = d.norm_pix_loss;
  j["attention_yaml"] = d.attention.yaml;
  j["decoder_attention_yaml"] = d.decoder_attention.yaml;
  j["attention_overrides"] = d.attention.overrides;
  return j;
}

PolicyModelDescription read_policy(const nlohmann::json& m) {
  PolicyModelDescription d;
  d.encoder_model = m.at("encoder_model").get<std::string>();
  d.encoder = read_shape(m, /*with_pool=*/true);
  d.attention.yaml = m.at("attention_yaml").get<std::string>();
  d.attention.overrides = m.at("attention_overrides").get<std::vector<std::string>>();
  d.obs_horizon = m.at("obs_horizon").get<int64_t>();
  d.pred_horizon = m.at("pred_horizon").get<int64_t>();
  d.action_horizon = m.at("action_horizon").get<int64_t>();
  d.down_dims = m.at("down_dims").get<std::string>();
  d.step_embed_dim = m.at("step_embed_dim").get<int64_t>();
  d.inference_steps = m.at("inference_steps").get<int64_t>();
  d.crossway_weight = m.at("crossway_weight").get<double>();
  d.crossway_input = m.at("crossway_input").get<std::string>();
  d.observation_image_size = m.at("observation_image_size").get<int64_t>();
  // Written since the spatial readouts (issue #32); older checkpoints hold class-token policies.
  d.obs_readout = m.value("obs_readout", std::string("cls"));
  d.obs_type = m.value("obs_type", std::string("image"));
  d.num_kp = m.value("num_kp", int64_t{32});
  d.obs_shift = m.value("obs_shift", int64_t{0});
  d.pose_weight = m.value("pose_weight", 0.0);
  return d;
}

nlohmann::json policy_json(const PolicyModelDescription& d) {
  nlohmann::json j = shape_json(d.encoder);
  j["encoder_model"] = d.encoder_model;
  j["attention_yaml"] = d.attention.yaml;
  j["attention_overrides"] = d.attention.overrides;
  j["obs_horizon"] = d.obs_horizon;
  j["pred_horizon"] = d.pred_horizon;
  j["action_horizon"] = d.action_horizon;
  j["down_dims"] = d.down_dims;
  j["step_embed_dim"] = d.step_embed_dim;
  j["inference_steps"] = d.inference_steps;
  j["crossway_weight"] = d.crossway_weight;
  j["crossway_input"] = d.crossway_input;
  j["observation_image_size"] = d.observation_image_size;
  j["obs_readout"] = d.obs_readout;
  j["obs_type"] = d.obs_type;
  j["num_kp"] = d.num_kp;
  j["obs_shift"] = d.obs_shift;
  j["pose_weight"] = d.pose_weight;
  return j;
}

}  // namespace

nlohmann::json model_description_json(const ModelDescription& d) {
  if (d.classifier) return classifier_json(*d.classifier);
  if (d.mae) return {{kMaeKey, mae_json(*d.mae)}};
  if (d.policy) return {{kPolicyKey, policy_json(*d.policy)}};
  return nlohmann::json::object();
}

std::optional<ModelDescription> read_model_description(const nlohmann::json& meta, const std::string& context) {
  if (!meta.is_object()) return std::nullopt;
  ModelDescription d;
  try {
    if (meta.contains(kMaeKey)) {
      d.mae = read_mae(meta.at(kMaeKey));
    } else if (meta.contains(kPolicyKey)) {
      d.policy = read_policy(meta.at(kPolicyKey));
    } else if (meta.contains("model") && meta.contains("attention_yaml")) {
      d.classifier = read_classifier(meta);
    } else {
      return std::nullopt;
    }
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(context + ": corrupt model description: " + e.what());
  }
  if (d.classifier) {
    parse(d.classifier->attention, context + " (attention)");
    // The overrides name the spatial attention's kwargs; the temporal config takes none.
    parse(d.classifier->temporal_attention, context + " (temporal attention)", /*apply_overrides=*/false);
  } else if (d.mae) {
    parse(d.mae->attention, context + " (attention)");
    parse(d.mae->decoder_attention, context + " (decoder attention)");
  } else {
    parse(d.policy->attention, context + " (attention)");
  }
  return d;
}

ClassifierDescription describe_classifier(const Classifier& model, const std::string& name, AttentionDescription attention,
                                          AttentionDescription temporal_attention, const std::string& dataset) {
  ClassifierDescription d;
  d.model = name;
  d.nb_classes = model.config().num_classes;
  d.shape = shape_of(model.config());
  if (const auto* video = dynamic_cast<const TimeSformer*>(&model)) {
    d.num_frames = video->num_frames();
    d.attention_type = video_attention_name(video->video_config().attention_type);
  }
  d.attention_source = attention.spec.source;
  d.attention = std::move(attention);
  d.temporal_attention = std::move(temporal_attention);
  d.dataset = dataset;
  return d;
}

MaeDescription describe_mae(const MaskedAutoencoder& model, const std::string& name, AttentionDescription attention,
                            AttentionDescription decoder_attention) {
  const MaeConfig& c = model.config();
  MaeDescription d;
  d.model = name;
  d.encoder = shape_of(c.encoder);
  d.encoder.global_pool = false;
  d.decoder_embed_dim = c.decoder_embed_dim;
  d.decoder_depth = c.decoder_depth;
  d.decoder_num_heads = c.decoder_num_heads;
  d.mask_ratio = c.mask_ratio;
  d.norm_pix_loss = c.norm_pix_loss;
  d.attention = std::move(attention);
  d.decoder_attention = std::move(decoder_attention);
  return d;
}

void apply_shape(const VitShapeDescription& s, ModelOptions& o) {
  if (s.img_size > 0) o.img_size = s.img_size;
  if (s.patch_size > 0) o.patch_size = s.patch_size;
  if (s.embed_dim > 0) o.embed_dim = s.embed_dim;
  if (s.depth > 0) o.depth = s.depth;
  if (s.num_heads > 0) o.num_heads = s.num_heads;
  o.global_pool = s.global_pool;
  o.stem = s.stem;
}

ModelOptions model_options(const ClassifierDescription& d) {
  ModelOptions o;
  if (d.nb_classes > 0) o.num_classes = d.nb_classes;
  if (d.shape) apply_shape(*d.shape, o);
  if (d.num_frames > 0) o.num_frames = d.num_frames;
  o.attention_type = d.attention_type;
  o.attention = d.attention.spec;
  o.temporal_attention = d.temporal_attention.spec;
  return o;
}

MaeOptions mae_options(const MaeDescription& d) {
  MaeOptions o;
  apply_shape(d.encoder, o.encoder);
  o.encoder.attention = d.attention.spec;
  if (d.decoder_embed_dim > 0) o.decoder_embed_dim = d.decoder_embed_dim;
  if (d.decoder_depth > 0) o.decoder_depth = d.decoder_depth;
  if (d.decoder_num_heads > 0) o.decoder_num_heads = d.decoder_num_heads;
  o.mask_ratio = d.mask_ratio;
  o.norm_pix_loss = d.norm_pix_loss;
  o.decoder_attention = d.decoder_attention.spec;
  return o;
}

}  // namespace sparsevit::models
