// The early-convolution stem as a model option (VitConfig::stem / ModelOptions::stem "conv"): the
// patch grid and token count stay the patchify model's, its channels and names are timm's,
// impossible geometries and unknown stem names are one-line UsageErrors, MAE and the TimeSformer
// build and run with it, and a checkpoint's model description keeps it (older descriptions,
// without the field, read as "patch"). timm's numbers: conv_stem_golden_test.cpp.
#include "models/conv_stem.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "models/mae_registry.h"
#include "models/model_description.h"
#include "models/model_registry.h"
#include "models/vision_transformer.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

ModelOptions conv_options() {
  ModelOptions o;
  o.stem = "conv";
  return o;
}

std::set<std::string> state_names(const torch::nn::Module& m) {
  std::set<std::string> names;
  for (const auto& p : m.named_parameters()) names.insert(p.key());
  for (const auto& b : m.named_buffers()) names.insert(b.key());
  return names;
}

std::set<std::string> with_prefix(const std::set<std::string>& names, const std::string& prefix) {
  std::set<std::string> out;
  for (const auto& n : names)
    if (n.rfind(prefix, 0) == 0) out.insert(n);
  return out;
}

TEST(ConvStem, ChannelsAreTimmsTieredDefault) {
  EXPECT_EQ(conv_stem_channels(8, 64), (std::vector<int64_t>{16, 32, 64, 64}));
  EXPECT_EQ(conv_stem_channels(16, 768), (std::vector<int64_t>{96, 192, 384, 768, 768}));
  EXPECT_EQ(conv_stem_channels(2, 64), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(conv_stem_channels(4, 6), (std::vector<int64_t>{3, 6, 6}));
}

TEST(ConvStem, PatchGridAndTokensAreThePatchifyModels) {
  auto patch = create_model("vit_nano_patch8_48", {});
  auto conv = create_model("vit_nano_patch8_48", conv_options());
  EXPECT_EQ(conv->config().stem, "conv");
  EXPECT_EQ(conv->config().num_patches(), 36);
  EXPECT_EQ(conv->config().num_tokens(), 37);
  EXPECT_EQ(conv->config().attention_geometry().num_tokens, patch->config().attention_geometry().num_tokens);
  EXPECT_EQ(conv->named_parameters()["pos_embed"].sizes(), (at::IntArrayRef{1, 37, 64}));
  torch::NoGradGuard no_grad;
  conv->eval();
  const at::Tensor x = torch::randn({2, 3, 48, 48});
  auto embed = std::dynamic_pointer_cast<PatchEmbed>(conv->named_modules()["patch_embed"]);
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->stem(), "conv");
  EXPECT_EQ(embed->forward(x).sizes(), (at::IntArrayRef{2, 36, 64}));
  EXPECT_EQ(conv->forward_features(x).sizes(), (at::IntArrayRef{2, 37, 64}));
  // Token (i, j)'s receptive field is pixels 8i-7 .. 8i+7 by 8j-7 .. 8j+7 (15 px): its own patch
  // and 7 px of the patches above and to the left. A change inside patch (2, 3) moves token (2, 3)
  // and the tokens below and to the right of it, (3, 3), (2, 4), (3, 4); nothing else.
  at::Tensor y = x.clone();
  y.narrow(2, 16, 8).narrow(3, 24, 8).add_(1.0);
  const at::Tensor moved = (embed->forward(y) - embed->forward(x)).abs().amax(-1).view({2, 6, 6}) > 0;
  at::Tensor expected = torch::zeros({6, 6}, torch::kBool);
  expected.narrow(0, 2, 2).narrow(1, 3, 2).fill_(true);
  EXPECT_TRUE(moved[0].equal(expected)) << moved[0];
}

TEST(ConvStem, ParameterNamesAreTimmsAndReplaceProj) {
  auto conv = create_model("vit_nano_patch8_48", conv_options());
  const std::set<std::string> stem = with_prefix(state_names(*conv), "patch_embed.");
  std::set<std::string> expected;
  for (int i = 0; i < 3; ++i)
    for (const char* s : {"conv.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"})
      expected.insert("patch_embed.backbone." + std::to_string(i) + "." + s);
  expected.insert("patch_embed.backbone.3.conv.weight");
  expected.insert("patch_embed.backbone.3.conv.bias");
  EXPECT_EQ(stem, expected);
  // Everything else is the patchify model's.
  auto patch = create_model("vit_nano_patch8_48", {});
  std::set<std::string> rest = state_names(*conv), patch_rest = state_names(*patch);
  for (const auto& n : stem) rest.erase(n);
  patch_rest.erase("patch_embed.proj.weight");
  patch_rest.erase("patch_embed.proj.bias");
  EXPECT_EQ(rest, patch_rest);
  // timm's (PyTorch's) init: BatchNorm weight 1, bias 0, running var 1.
  auto params = conv->named_parameters();
  EXPECT_TRUE(params["patch_embed.backbone.1.bn.weight"].eq(1).all().item<bool>());
  EXPECT_TRUE(params["patch_embed.backbone.1.bn.bias"].eq(0).all().item<bool>());
  EXPECT_TRUE(conv->named_buffers()["patch_embed.backbone.1.bn.running_var"].eq(1).all().item<bool>());
}

TEST(ConvStem, PatchSizeNotAPowerOfTwoIsAUsageError) {
  for (const int64_t patch : {6, 12, 1}) {
    ModelOptions o = conv_options();
    o.patch_size = patch;
    const std::string msg = usage_error_of([&] { create_model("vit_nano_patch8_48", o); });
    EXPECT_NE(msg.find("power of two"), std::string::npos) << patch << ": " << msg;
    EXPECT_NE(msg.find(std::to_string(patch)), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    // The VitConfig route reports the same.
    VitConfig c = vit_config(find_model_shape("vit_nano_patch8_48"), {});
    c.patch_size = patch;
    c.stem = "conv";
    EXPECT_THROW(VisionTransformer{c}, UsageError) << patch;
  }
  ModelOptions fine = conv_options();
  fine.patch_size = 6;
  fine.stem = "patch";
  EXPECT_NO_THROW(create_model("vit_nano_patch8_48", fine));  // patchify takes any divisor
}

TEST(ConvStem, EmbedDimNotAMultipleOfTheNarrowestChannelIsAUsageError) {
  ModelOptions o = conv_options();
  o.embed_dim = 66;  // patch 8: channels dim/4, dim/2, dim -> needs a multiple of 4
  o.num_heads = 6;
  const std::string msg = usage_error_of([&] { create_model("vit_nano_patch8_48", o); });
  EXPECT_NE(msg.find("multiple of 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("66"), std::string::npos) << msg;
}

TEST(ConvStem, UnknownStemIsAUsageErrorListingTheChoices) {
  ModelOptions o;
  o.stem = "convv";
  const std::string msg = usage_error_of([&] { create_model("vit_nano_patch8_48", o); });
  EXPECT_NE(msg.find("unknown stem 'convv'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'conv'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("patch, conv"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_THROW(check_stem("Patch"), UsageError);
  EXPECT_EQ(check_stem("conv"), "conv");
  EXPECT_EQ(stem_names(), (std::vector<std::string>{"patch", "conv"}));
  VitConfig c = vit_config(find_model_shape("vit_nano_patch8_48"), {});
  c.stem = "cnn";
  EXPECT_THROW(VisionTransformer{c}, UsageError);
}

TEST(ConvStem, MaeBuildsAndRunsWithTheConvStem) {
  const std::vector<std::string> names = mae_model_names();
  ASSERT_NE(std::find(names.begin(), names.end(), "mae_vit_nano_patch8_48"), names.end());
  MaeOptions o;
  o.encoder.stem = "conv";
  auto mae = create_mae_model("mae_vit_nano_patch8_48", o);
  EXPECT_EQ(mae->config().encoder.stem, "conv");
  const auto params = mae->named_parameters();
  EXPECT_TRUE(params.contains("patch_embed.backbone.0.conv.weight"));
  EXPECT_FALSE(params.contains("patch_embed.proj.weight"));
  // No MAE linear init on the stem: BatchNorm weight 1 / bias 0 as PyTorch leaves them.
  EXPECT_TRUE(params["patch_embed.backbone.2.bn.weight"].eq(1).all().item<bool>());
  torch::manual_seed(0);
  const MaeOutput out = mae->forward(torch::randn({2, 3, 48, 48}));
  EXPECT_EQ(out.pred.sizes(), (at::IntArrayRef{2, 36, 8 * 8 * 3}));
  EXPECT_TRUE(std::isfinite(out.loss.item<double>()));
  out.loss.backward();
  EXPECT_GT(mae->named_parameters()["patch_embed.backbone.0.conv.weight"].grad().abs().sum().item<double>(), 0.0);
}

TEST(ConvStem, TimeSformerBuildsAndRunsWithTheConvStem) {
  auto video = create_classifier("timesformer_nano_patch4_28", conv_options());
  EXPECT_EQ(video->config().stem, "conv");
  EXPECT_TRUE(video->named_parameters().contains("patch_embed.backbone.1.conv.weight"));
  torch::NoGradGuard no_grad;
  EXPECT_EQ(video->forward(torch::randn({2, 1, 8, 28, 28})).sizes(), (at::IntArrayRef{2, 10}));
}

TEST(ConvStem, ClassifierDescriptionKeepsTheStem) {
  auto conv = create_model("vit_nano_patch8_48", conv_options());
  ModelDescription d;
  d.classifier = describe_classifier(*conv, "vit_nano_patch8_48", {}, {}, "");
  const nlohmann::json j = model_description_json(d);
  EXPECT_EQ(j.at("model_shape").at("stem"), "conv");
  const auto back = read_model_description(j, "ck.pt");
  ASSERT_TRUE(back && back->classifier && back->classifier->shape);
  EXPECT_EQ(back->classifier->shape->stem, "conv");
  EXPECT_EQ(model_description_json(*back), j);
  const ModelOptions o = model_options(*back->classifier);
  EXPECT_EQ(o.stem, "conv");
  auto rebuilt = create_classifier(back->classifier->model, o);
  EXPECT_EQ(rebuilt->config().stem, "conv");
  EXPECT_EQ(state_names(*rebuilt), state_names(*conv));
}

TEST(ConvStem, DescriptionWithoutTheFieldReadsAsPatch) {
  auto patch = create_model("vit_nano_patch8_48", {});
  ModelDescription d;
  d.classifier = describe_classifier(*patch, "vit_nano_patch8_48", {}, {}, "");
  const nlohmann::json j = model_description_json(d);
  EXPECT_FALSE(j.at("model_shape").contains("stem"));  // patchify descriptions are as they always were
  const auto back = read_model_description(j, "ck.pt");
  ASSERT_TRUE(back && back->classifier && back->classifier->shape);
  EXPECT_EQ(back->classifier->shape->stem, "patch");
  EXPECT_EQ(model_options(*back->classifier).stem, "patch");
  // An MAE description of before the stem, likewise.
  const nlohmann::json old_mae = {{"mae",
                                   {{"model", "mae_vit_nano_patch8_48"}, {"img_size", 48}, {"patch_size", 8},
                                    {"embed_dim", 64}, {"depth", 4}, {"num_heads", 4}, {"decoder_embed_dim", 64},
                                    {"decoder_depth", 2}, {"decoder_num_heads", 4}, {"mask_ratio", 0.75},
                                    {"norm_pix_loss", false}, {"attention_yaml", ""}, {"decoder_attention_yaml", ""},
                                    {"attention_overrides", nlohmann::json::array()}}}};
  const auto mae = read_model_description(old_mae, "old.pt");
  ASSERT_TRUE(mae && mae->mae);
  EXPECT_EQ(mae->mae->encoder.stem, "patch");
  EXPECT_EQ(mae_options(*mae->mae).encoder.stem, "patch");
}

TEST(ConvStem, MaeDescriptionKeepsTheStem) {
  MaeOptions o;
  o.encoder.stem = "conv";
  auto mae = create_mae_model("mae_vit_nano_patch8_48", o);
  ModelDescription d;
  d.mae = describe_mae(*mae, "mae_vit_nano_patch8_48", {}, {});
  const nlohmann::json j = model_description_json(d);
  EXPECT_EQ(j.at("mae").at("stem"), "conv");
  const auto back = read_model_description(j, "pretrain.pt");
  ASSERT_TRUE(back && back->mae);
  EXPECT_EQ(back->mae->encoder.stem, "conv");
  auto rebuilt = create_mae_model(back->mae->model, mae_options(*back->mae));
  EXPECT_EQ(rebuilt->config().encoder.stem, "conv");
  EXPECT_EQ(state_names(*rebuilt), state_names(*mae));
}

}  // namespace
}  // namespace sparsevit::models
