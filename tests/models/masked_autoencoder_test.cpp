// MAE against an independent float64 reference of models_mae.py (tests/golden/mae_reference.py,
// fixture made by make_mae_golden.py): loss, prediction and mask for dense attention in MAE's own
// shuffled order (sparsevit keeps the visible tokens in raster order; dense attention cannot tell),
// with norm_pix_loss, and with a sparse `local` pattern over the encoder's visible tokens. Also
// MAE's sin-cos table, its position-embedding interpolation, the registry and the parameter names.
#include "models/masked_autoencoder.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "golden/golden_fixture.h"
#include "golden/mae_golden.inc"
#include "models/mae_registry.h"
#include "models/pos_embed.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

using golden::tensor_from;

MaeConfig tiny_config(const std::string& attention_yaml, bool norm_pix_loss) {
  MaeConfig c;
  c.encoder.img_size = 16;
  c.encoder.patch_size = 4;
  c.encoder.in_chans = 3;
  c.encoder.embed_dim = 16;
  c.encoder.depth = 2;
  c.encoder.num_heads = 2;
  c.encoder.attention = config::parse_attention_spec(attention_yaml, "golden.yaml");
  c.decoder_embed_dim = 8;
  c.decoder_depth = 1;
  c.decoder_num_heads = 2;
  c.mask_ratio = 0.75;
  c.norm_pix_loss = norm_pix_loss;
  return c;
}

TEST(MaskedAutoencoderGolden, MatchesTheReference) {
  for (const auto& gc : golden::kMaeCases) {
    SCOPED_TRACE(gc.name);
    MaskedAutoencoder model(tiny_config(gc.attention_yaml, gc.norm_pix_loss));
    golden::load_parameters_by_name(model, golden::kMaeWeights, {"pos_embed", "decoder_pos_embed"});
    golden::cast_parameters(model, at::kDouble);
    model.eval();
    const at::Tensor imgs = tensor_from(golden::kMaeImages, {golden::kMaeBatch, 3, 16, 16}, at::kDouble);
    const at::Tensor noise = tensor_from(golden::kMaeNoise, {golden::kMaeBatch, 16}, at::kDouble);
    const MaeOutput out = model.forward(imgs, noise);
    EXPECT_NEAR(out.loss.item<double>(), gc.loss, 1e-9 * std::abs(gc.loss));
    EXPECT_LT((out.pred - tensor_from(gc.pred, {golden::kMaeBatch, 16, 48})).abs().max().item<double>(), 1e-9);
    EXPECT_TRUE(out.mask.equal(tensor_from(gc.mask, {golden::kMaeBatch, 16})));
  }
}

TEST(MaskedAutoencoderGolden, SincosTableIsMaes) {
  const at::Tensor mine = sincos_2d_pos_embed(16, 4, true).to(at::kDouble);
  EXPECT_LT((mine - tensor_from(golden::kMaeSincos16x4, {17, 16})).abs().max().item<double>(), 1e-7);
  EXPECT_THROW(sincos_2d_pos_embed(6, 4, true), UsageError);
}

TEST(MaskedAutoencoder, MaskingKeepsLenKeepPatchesAndTheLossSeesOnlyMaskedOnes) {
  torch::manual_seed(0);
  MaskedAutoencoder model(tiny_config("attention: {backend: vit}", false));
  EXPECT_EQ(model.config().len_keep(), 4);
  EXPECT_EQ(model.config().encoder_geometry().num_tokens, 5);
  const at::Tensor imgs = torch::randn({3, 3, 16, 16});
  const at::Tensor noise = torch::rand({3, 16});
  const MaeOutput a = model.forward(imgs, noise);
  EXPECT_TRUE(a.mask.sum(1).eq(12).all().item<bool>());
  // Changing the visible pixels changes the encoder's input, so keep them and change only the
  // masked patches' targets: the loss moves; a change confined to visible patches leaves the
  // targets of the loss alone.
  const at::Tensor visible = model.unpatchify((1 - a.mask).unsqueeze(-1).expand({3, 16, 48}).contiguous());
  const at::Tensor b_imgs = imgs + 5.0 * (1 - visible);
  const MaeOutput b = model.forward(b_imgs, noise);
  EXPECT_GT(std::abs(b.loss.item<double>() - a.loss.item<double>()), 1e-3);
  EXPECT_TRUE(b.pred.equal(a.pred)) << "masked pixels never reach the encoder";
  EXPECT_TRUE(model.unpatchify(model.patchify(imgs)).equal(imgs));
}

TEST(MaskedAutoencoder, GradientsReachEncoderDecoderAndMaskToken) {
  torch::manual_seed(1);
  MaskedAutoencoder model(tiny_config("attention: {backend: vit, mask: local, mask_kwargs: {window: 1}}", true));
  model.forward(torch::randn({2, 3, 16, 16})).loss.backward();
  for (const char* name : {"patch_embed.proj.weight", "cls_token", "blocks.0.attn.qkv.weight", "mask_token",
                           "decoder_blocks.0.mlp.fc1.weight", "decoder_pred.weight"}) {
    const at::Tensor g = model.named_parameters()[name].grad();
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_GT(g.abs().sum().item<double>(), 0) << name;
  }
  EXPECT_FALSE(model.named_parameters()["pos_embed"].requires_grad());
}

TEST(MaeRegistry, MaesNamesShapesAndParameterCount) {
  EXPECT_EQ(mae_encoder_name("mae_vit_base_patch16"), "vit_base_patch16_224");
  EXPECT_EQ(mae_encoder_name("mae_vit_nano_patch4_28"), "vit_nano_patch4_28");
  EXPECT_THROW(mae_encoder_name("mae_vit_base_patch61"), UsageError);
  const MaeConfig b = mae_config("mae_vit_base_patch16", {});
  EXPECT_EQ(b.decoder_embed_dim, 512);
  EXPECT_EQ(b.decoder_depth, 8);
  EXPECT_EQ(b.decoder_num_heads, 16);
  EXPECT_EQ(b.encoder_geometry().num_tokens, 50);  // int(196 * 0.25) + 1
  const MaeConfig h = mae_config("mae_vit_huge_patch14", {});
  EXPECT_EQ(h.encoder.embed_dim, 1280);
  EXPECT_EQ(h.encoder.patch_size, 14);
  // MAE's ViT-B pretraining model: every name of models_mae.py, and its trainable parameter count.
  MaskedAutoencoder model(b);
  int64_t trainable = 0;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) trainable += p.numel();
  EXPECT_EQ(trainable, golden::kMaeVitBaseParameters);
  const auto params = model.named_parameters();
  for (const char* name : {"cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.11.mlp.fc2.bias", "norm.weight",
                           "decoder_embed.weight", "mask_token", "decoder_pos_embed", "decoder_blocks.7.attn.qkv.weight",
                           "decoder_norm.bias", "decoder_pred.weight"})
    EXPECT_TRUE(params.contains(name)) << name;
  EXPECT_EQ(params["decoder_pred.weight"].sizes(), (at::IntArrayRef{768, 512}));
}

TEST(PosEmbed, InterpolationKeepsThePrefixAndResizesTheGrid) {
  const at::Tensor pos = torch::randn({1, 1 + 16, 8});
  EXPECT_TRUE(interpolate_pos_embed(pos, 1, 4).equal(pos));
  const at::Tensor big = interpolate_pos_embed(pos, 1, 7);
  EXPECT_EQ(big.sizes(), (at::IntArrayRef{1, 50, 8}));
  EXPECT_TRUE(big.narrow(1, 0, 1).equal(pos.narrow(1, 0, 1)));
  // A constant grid stays constant under bicubic resizing.
  const at::Tensor flat = at::cat({torch::zeros({1, 1, 8}), torch::full({1, 16, 8}, 0.5)}, 1);
  EXPECT_LT((interpolate_pos_embed(flat, 1, 6).narrow(1, 1, 36) - 0.5).abs().max().item<double>(), 1e-6);
  EXPECT_THROW(interpolate_pos_embed(torch::randn({1, 1 + 15, 8}), 1, 4), UsageError);
}

}  // namespace
}  // namespace sparsevit::models
