// Weight loading into TimeSformer models (models/pretrained_weights.h, TimeSformer's
// load_pretrained): image ViT weights initialise the temporal attention from the spatial one,
// TimeSformer's `model.` wrapper prefix is dropped, time_embed is resized (nearest) to the
// model's frames, and an image ViT loaded into a video model classifies a still clip as the
// image model classifies its frame (where that is exactly true; see the last tests).
#include "models/pretrained_weights.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <set>
#include <string>

#include "models/timesformer.h"
#include "models/video_attention_layout.h"
#include "models/vision_transformer.h"
#include "models_test_util.h"

namespace sparsevit::models {
namespace {

using models::VideoAttentionType;

using namespace test_util;  // kImg ... kClasses, contains

models::VitConfig frame_config() {
  models::VitConfig c;
  c.img_size = kImg;
  c.patch_size = kPatch;
  c.in_chans = kChans;
  c.num_classes = kClasses;
  c.embed_dim = kDim;
  c.depth = kDepth;
  c.num_heads = kHeads;
  return c;
}

std::shared_ptr<models::TimeSformer> video_model(VideoAttentionType type, int64_t frames) {
  models::TimeSformerConfig c;
  c.vit = frame_config();
  c.num_frames = frames;
  c.attention_type = type;
  auto model = std::make_shared<models::TimeSformer>(c);
  model->eval();
  return model;
}

// Every parameter random (LayerNorm weights around 1), so that copied values are recognisable
// and logits are O(1).
void randomise(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.named_parameters()) {
    const bool norm_weight = p.key().find("norm") != std::string::npos && p.key().find(".weight") != std::string::npos;
    p.value().normal_(norm_weight ? 1.0 : 0.0, 0.3);
  }
}

std::shared_ptr<models::VisionTransformer> random_image_vit() {
  auto vit = std::make_shared<models::VisionTransformer>(frame_config());
  randomise(*vit);
  vit->eval();
  return vit;
}


std::string replaced(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

TEST(VideoPretrainedWeights, ImageWeightsInitialiseTheTemporalAttentionOfADividedModel) {
  torch::manual_seed(0);
  auto vit = random_image_vit();
  const weights::NamedTensors image = exported_parameters(*vit);
  auto model = video_model(VideoAttentionType::kDividedSpaceTime, 4);
  const models::PretrainedLoad report = models::load_pretrained(*model, image, "vit.pt");
  const auto params = model->named_parameters();

  // Every image weight copied under its own name (the head too: same class count).
  for (const auto& [name, tensor] : image) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(params.contains(name));
    EXPECT_TRUE(params[name].equal(tensor));
  }
  // temporal_attn.* = attn.*, temporal_norm1.* = norm1.*: TimeSformer's load_pretrained.
  int64_t temporal_copies = 0;
  for (const auto& p : params) {
    const std::string& name = p.key();
    std::string from;
    if (contains(name, ".temporal_attn.")) from = replaced(name, ".temporal_attn.", ".attn.");
    if (contains(name, ".temporal_norm1.")) from = replaced(name, ".temporal_norm1.", ".norm1.");
    if (from.empty()) continue;
    SCOPED_TRACE(name);
    EXPECT_TRUE(p.value().equal(params[from]));
    EXPECT_NE(p.value().data_ptr(), params[from].data_ptr());  // a copy, trained on its own
    ++temporal_copies;
  }
  EXPECT_EQ(temporal_copies, kDepth * 6);  // per block: temporal_norm1 weight, bias; qkv and proj weight, bias
  // What the file cannot provide keeps TimeSformer's zero init.
  EXPECT_TRUE(params["time_embed"].eq(0).all().item<bool>());
  std::set<std::string> expected_missing = {"time_embed"};
  for (int64_t i = 0; i < kDepth; ++i) {
    const std::string fc = "blocks." + std::to_string(i) + ".temporal_fc.";
    EXPECT_TRUE(params[fc + "weight"].eq(0).all().item<bool>());
    EXPECT_TRUE(params[fc + "bias"].eq(0).all().item<bool>());
    expected_missing.insert({fc + "weight", fc + "bias"});
  }

  EXPECT_EQ(report.temporal_from_spatial, kDepth * 6);
  EXPECT_EQ(report.loaded.size(), image.size() + kDepth * 6);
  EXPECT_EQ(std::set<std::string>(report.missing.begin(), report.missing.end()), expected_missing);
  EXPECT_TRUE(report.unexpected.empty());
  EXPECT_TRUE(report.removed.empty());
  EXPECT_FALSE(report.head_reinitialised);
  EXPECT_FALSE(report.time_embed_resized);
  EXPECT_FALSE(report.pos_embed_interpolated);
  const std::string text = models::describe(report);
  EXPECT_TRUE(contains(text, "temporal attention initialised from the spatial attention (18 tensors)")) << text;
  EXPECT_TRUE(contains(text, "missing: ")) << text;
}

TEST(VideoPretrainedWeights, ImageWeightsLoadIntoSpaceOnlyAndJointModelsWithoutTemporalCopies) {
  torch::manual_seed(1);
  const weights::NamedTensors image = exported_parameters(*random_image_vit());
  for (VideoAttentionType type : {VideoAttentionType::kSpaceOnly, VideoAttentionType::kJointSpaceTime}) {
    SCOPED_TRACE(models::video_attention_name(type));
    auto model = video_model(type, 4);
    const models::PretrainedLoad report = models::load_pretrained(*model, image, "vit.pt");
    EXPECT_EQ(report.temporal_from_spatial, 0);
    EXPECT_EQ(report.loaded.size(), image.size());
    EXPECT_TRUE(report.unexpected.empty());
    const std::set<std::string> missing(report.missing.begin(), report.missing.end());
    EXPECT_EQ(missing, type == VideoAttentionType::kSpaceOnly ? std::set<std::string>{} : std::set<std::string>{"time_embed"});
    EXPECT_FALSE(contains(models::describe(report), "temporal attention")) << models::describe(report);
  }
}

// TimeSformer's checkpoints wrap the model: every key starts with `model.` (and `module.` when
// saved from DistributedDataParallel). Such a state dict loads completely; its temporal attention
// is its own, not copied from the spatial one.
TEST(VideoPretrainedWeights, PrefixedTimeSformerStateDictsLoadCompletely) {
  torch::manual_seed(2);
  auto source = video_model(VideoAttentionType::kDividedSpaceTime, 4);
  randomise(*source);
  const weights::NamedTensors state = exported_parameters(*source);
  const at::Tensor clips = torch::randn({2, kChans, 4, kImg, kImg});
  at::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = source->forward(clips);
  }
  for (const std::string prefix : {"model.", "module.model.", "module."}) {
    SCOPED_TRACE(prefix);
    weights::NamedTensors prefixed;
    for (const auto& [name, tensor] : state) prefixed.emplace_back(prefix + name, tensor);
    auto model = video_model(VideoAttentionType::kDividedSpaceTime, 4);
    const models::PretrainedLoad report = models::load_pretrained(*model, prefixed, "timesformer.pyth");
    EXPECT_TRUE(report.missing.empty()) << models::describe(report);
    EXPECT_TRUE(report.unexpected.empty()) << models::describe(report);
    EXPECT_TRUE(report.removed.empty()) << models::describe(report);
    EXPECT_EQ(report.loaded.size(), state.size());
    EXPECT_EQ(report.temporal_from_spatial, 0);
    EXPECT_FALSE(report.head_reinitialised);
    EXPECT_FALSE(report.time_embed_resized);
    const auto params = model->named_parameters();
    for (const auto& [name, tensor] : state) EXPECT_TRUE(params[name].equal(tensor)) << name;
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(model->forward(clips).equal(expected));
  }
}

// TimeSformer's load_pretrained: F.interpolate(time_embed.transpose(1, 2), size=T, mode='nearest'):
// model frame i takes source frame floor(i * T_source / T).
TEST(VideoPretrainedWeights, TimeEmbedIsResizedNearestToTheModelsFrames) {
  torch::manual_seed(3);
  auto source = video_model(VideoAttentionType::kDividedSpaceTime, 4);
  randomise(*source);
  const weights::NamedTensors state = exported_parameters(*source);
  const at::Tensor source_embed = source->named_parameters()["time_embed"];
  ASSERT_EQ(source_embed.sizes(), (at::IntArrayRef{1, 4, kDim}));
  for (int64_t frames : {8, 3, 2}) {
    SCOPED_TRACE(frames);
    auto model = video_model(VideoAttentionType::kDividedSpaceTime, frames);
    const models::PretrainedLoad report = models::load_pretrained(*model, state, "timesformer_4_frames.pyth");
    EXPECT_TRUE(report.time_embed_resized);
    EXPECT_TRUE(report.missing.empty()) << models::describe(report);
    EXPECT_TRUE(contains(models::describe(report), "time_embed resized (nearest) to the model's frames")) << models::describe(report);
    const at::Tensor embed = model->named_parameters()["time_embed"];
    ASSERT_EQ(embed.sizes(), (at::IntArrayRef{1, frames, kDim}));
    for (int64_t i = 0; i < frames; ++i) {
      const int64_t from = i * 4 / frames;  // 8: 0 0 1 1 2 2 3 3; 3: 0 1 2; 2: 0 2
      EXPECT_TRUE(embed.select(1, i).equal(source_embed.select(1, from))) << "frame " << i << " from " << from;
    }
    // Everything else is frame-count independent and loads unchanged.
    EXPECT_TRUE(model->named_parameters()["pos_embed"].equal(source->named_parameters()["pos_embed"]));
  }
}

at::Tensor still_clip(const at::Tensor& images, int64_t frames) {  // [B, C, H, W] -> [B, C, T, H, W]
  return images.unsqueeze(2).expand({-1, -1, frames, -1, -1}).contiguous();
}

// An image ViT loaded into a video model, on a clip whose T frames are all the same image:
//  - divided_space_time: time_embed = 0 and temporal_fc = 0 (both absent from the file), so the
//    temporal half of every block is the identity; every frame then holds the same tokens as the
//    image ViT (the same patches, pos_embed and class token), the spatial attention and MLP of a
//    frame are the ViT block's, the class token's update is the mean over T identical per-frame
//    updates (= the ViT's), and the head reads the class token: the image ViT's logits, up to
//    float rounding (the mean of T equal floats).
//  - space_only: each frame runs the ViT's blocks unchanged; the T identical final token sets are
//    averaged (= any one of them) before norm and head: the image ViT's logits.
//  - joint_space_time: NOT equal. One attention runs over 1 + P * T tokens in which every patch
//    token appears T times while the class token appears once, so each softmax gives the class
//    token T times less weight relative to the patches than the image ViT does.
TEST(VideoPretrainedWeights, AStillClipGetsTheImageModelsLogitsForDividedAndSpaceOnly) {
  torch::manual_seed(4);
  auto vit = random_image_vit();
  const weights::NamedTensors image = exported_parameters(*vit);
  const at::Tensor images = torch::randn({3, kChans, kImg, kImg});
  torch::NoGradGuard no_grad;
  const at::Tensor expected = vit->forward(images);
  ASSERT_GT(expected.abs().max().item<double>(), 0.1);  // logits large enough to mean something
  for (int64_t frames : {1, 4, 8}) {
    for (VideoAttentionType type : {VideoAttentionType::kDividedSpaceTime, VideoAttentionType::kSpaceOnly,
                                    VideoAttentionType::kJointSpaceTime}) {
      SCOPED_TRACE(models::video_attention_name(type) + ", " + std::to_string(frames) + " frames");
      auto model = video_model(type, frames);
      models::load_pretrained(*model, image, "vit.pt");
      const at::Tensor logits = model->forward(still_clip(images, frames));
      const double diff = (logits - expected).abs().max().item<double>();
      if (type != VideoAttentionType::kJointSpaceTime || frames == 1)  // one frame: joint is the image ViT too
        EXPECT_LE(diff, 1e-5) << "logits\n" << logits << "\nimage ViT\n" << expected;
      else
        EXPECT_GT(diff, 1e-3) << "joint space-time attention should weigh the class token differently";
    }
  }
}

// The temporal attention copied from the spatial one is live once temporal_fc is trained: a
// non-zero temporal_fc moves the still clip's logits away from the image ViT's.
TEST(VideoPretrainedWeights, ANonZeroTemporalFcBreaksTheImageEquivalence) {
  torch::manual_seed(5);
  auto vit = random_image_vit();
  auto model = video_model(VideoAttentionType::kDividedSpaceTime, 4);
  models::load_pretrained(*model, exported_parameters(*vit), "vit.pt");
  const at::Tensor images = torch::randn({2, kChans, kImg, kImg});
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters())
    if (contains(p.key(), ".temporal_fc.")) p.value().normal_(0.0, 0.3);
  const double diff = (model->forward(still_clip(images, 4)) - vit->forward(images)).abs().max().item<double>();
  EXPECT_GT(diff, 1e-3);
}

}  // namespace
}  // namespace sparsevit::models
