// models/model_description: the one writer and reader of what a checkpoint says about its model.
// Each kind reads back what it wrote; the JSON keeps the keys older checkpoints have (a reader of
// today must read them); a description that is there but broken is a one-line error.
#include "models/model_description.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/model_registry.h"
#include "models/vision_transformer.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

const char* const kLocal = "attention:\n  backend: vit\n  mask: local\n  mask_kwargs: {window: 3}\n";

AttentionDescription local_attention() {
  AttentionDescription a;
  a.yaml = kLocal;
  a.overrides = {"window=2"};
  return a;
}

TEST(ModelDescription, ClassifierReadsBackWhatItWrote) {
  ModelOptions o;
  o.num_classes = 7;
  o.global_pool = true;
  auto vit = create_model("vit_nano_patch4_28", o);
  ModelDescription d;
  d.classifier = describe_classifier(*vit, "vit_nano_patch4_28", local_attention(), {}, "fashion_mnist");
  const nlohmann::json j = model_description_json(d);
  // The keys checkpoints have always had, and the new "dataset".
  EXPECT_EQ(j.at("model"), "vit_nano_patch4_28");
  EXPECT_EQ(j.at("nb_classes"), 7);
  EXPECT_EQ(j.at("model_shape").at("num_heads"), vit->config().num_heads);
  EXPECT_EQ(j.at("model_shape").at("global_pool"), true);
  EXPECT_FALSE(j.at("model_shape").contains("num_frames"));  // an image model
  EXPECT_EQ(j.at("attention_yaml"), kLocal);
  EXPECT_EQ(j.at("attention_overrides"), nlohmann::json::array({"window=2"}));
  EXPECT_EQ(j.at("temporal_attention_yaml"), "");
  EXPECT_EQ(j.at("dataset"), "fashion_mnist");

  const std::optional<ModelDescription> back = read_model_description(j, "ck.pt");
  ASSERT_TRUE(back && back->classifier && !back->mae && !back->policy);
  const ClassifierDescription& c = *back->classifier;
  EXPECT_EQ(c.model, "vit_nano_patch4_28");
  ASSERT_TRUE(c.shape);
  EXPECT_EQ(c.shape->embed_dim, vit->config().embed_dim);
  EXPECT_EQ(c.attention.spec.mask, "local");
  EXPECT_EQ(c.attention.spec.mask_kwargs.values().at("window").items.front(), "2");  // overrides applied
  EXPECT_FALSE(c.temporal_attention.spec.has_mask());
  EXPECT_EQ(model_description_json(*back), j);

  // The options rebuild the same model: same parameter shapes.
  auto rebuilt = create_model(c.model, model_options(c));
  const auto a = vit->named_parameters(), b = rebuilt->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& p : a) EXPECT_EQ(p.value().sizes(), b[p.key()].sizes()) << p.key();
}

TEST(ModelDescription, ReadsCheckpointsWrittenBeforeShapeAndDatasetKeys) {
  // The oldest finetune metadata: no model_shape, the dataset only in the run's config.
  const nlohmann::json old = {{"model", "vit_nano_patch4_28"},
                              {"nb_classes", 10},
                              {"attention_yaml", kLocal},
                              {"config", {{"dataset", "mnist"}, {"epochs", 3}}},
                              {"world_size", 1}};
  const std::optional<ModelDescription> d = read_model_description(old, "old.pt");
  ASSERT_TRUE(d && d->classifier);
  EXPECT_FALSE(d->classifier->shape.has_value());
  EXPECT_EQ(d->classifier->dataset, "mnist");
  EXPECT_TRUE(d->classifier->attention.overrides.empty());
  const ModelOptions o = model_options(*d->classifier);
  EXPECT_FALSE(o.embed_dim.has_value());  // the registered shape
  EXPECT_EQ(o.num_classes, 10);
}

TEST(ModelDescription, MaeAndPolicyRoundTrip) {
  ModelDescription mae;
  mae.mae = MaeDescription{};
  mae.mae->model = "mae_vit_nano_patch4_28";
  mae.mae->encoder = {28, 4, 64, 4, 4, false};
  mae.mae->decoder_embed_dim = 32;
  mae.mae->decoder_depth = 2;
  mae.mae->decoder_num_heads = 4;
  mae.mae->attention = local_attention();
  mae.mae->decoder_attention = {kLocal, {"window=2"}, {}};
  const nlohmann::json mj = model_description_json(mae);
  ASSERT_TRUE(mj.contains("mae"));
  EXPECT_FALSE(mj.at("mae").contains("global_pool"));  // MAE's description never had one
  const auto mback = read_model_description(mj, "mae.pt");
  ASSERT_TRUE(mback && mback->mae && !mback->classifier);
  EXPECT_EQ(model_description_json(*mback), mj);
  EXPECT_EQ(mae_options(*mback->mae).decoder_depth, 2);
  EXPECT_EQ(mback->mae->decoder_attention.spec.mask, "local");

  ModelDescription policy;
  policy.policy = PolicyModelDescription{};
  policy.policy->encoder_model = "vit_nano_patch8_48";
  policy.policy->attention = local_attention();
  policy.policy->down_dims = "64,128";
  policy.policy->crossway_input = "obs";
  const nlohmann::json pj = model_description_json(policy);
  ASSERT_TRUE(pj.contains("policy"));
  const auto pback = read_model_description(pj, "policy.pt");
  ASSERT_TRUE(pback && pback->policy);
  EXPECT_EQ(pback->policy->down_dims, "64,128");
  EXPECT_EQ(model_description_json(*pback), pj);
}

TEST(ModelDescription, NoneAndBrokenDescriptions) {
  EXPECT_FALSE(read_model_description(nlohmann::json::object(), "x.pt").has_value());
  EXPECT_FALSE(read_model_description({{"world_size", 1}}, "x.pt").has_value());
  EXPECT_FALSE(read_model_description(nlohmann::json::array(), "x.pt").has_value());
  try {
    read_model_description({{"mae", {{"model", "mae_vit_nano_patch4_28"}}}}, "x.pt");
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("x.pt: corrupt model description"), std::string::npos) << e.what();
  }
  // A broken attention config names the checkpoint.
  EXPECT_THROW(read_model_description({{"model", "vit_nano_patch4_28"}, {"attention_yaml", "attention: ["}}, "x.pt"),
               UsageError);
}

}  // namespace
}  // namespace sparsevit::models
