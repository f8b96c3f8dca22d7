// The Crossway decoder's faster computations against the original's layer calls, values and
// gradients in float64: Upsample2d (four 2 x 2 phase convs) against LibTorch's transposed conv,
// mish_via_exp against at::mish, forward_with_shared (full or tiled x) against forward on the
// concatenated input, the decoder against its levels run on [tiled grid, positional grid]
// concatenations; and the U-Net-scaled width rule.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <string>
#include <vector>

#include "policy/conv2d_components.h"
#include "policy/crossway_decoder.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Gradients of every parameter of `m` after backward of sum(out * weights).
std::vector<at::Tensor> parameter_grads(torch::nn::Module& m, const at::Tensor& out, const at::Tensor& weights) {
  m.zero_grad();
  (out * weights).sum().backward();
  std::vector<at::Tensor> grads;
  for (const auto& p : m.parameters()) grads.push_back(p.grad().clone());
  return grads;
}

void expect_same_grads(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i], b[i]), tolerance) << "parameter " << i;
}

TEST(CrosswayDecoderEquivalence, Upsample2dIsTheTransposedConv) {
  for (int64_t dim : {3, 8}) {
    at::manual_seed(dim);
    Upsample2d up(dim);
    up->to(at::kDouble);
    at::Tensor x = at::randn({2, dim, 5, 7}, at::kDouble).requires_grad_();
    const at::Tensor out = up->forward(x);
    ASSERT_EQ(out.sizes(), at::IntArrayRef({2, dim, 10, 14}));
    const auto& conv = up->named_children()["conv"];
    const at::Tensor weight = conv->named_parameters()["weight"], bias = conv->named_parameters()["bias"];
    at::Tensor x_ref = x.detach().clone().requires_grad_();
    const at::Tensor ref = at::conv_transpose2d(x_ref, weight, bias, /*stride=*/2, /*padding=*/1);
    EXPECT_LT(max_abs_diff(out, ref), 1e-12) << "dim " << dim;

    const at::Tensor w = at::randn(out.sizes(), at::kDouble);
    const auto grads = parameter_grads(*up, out, w);
    const at::Tensor x_grad = x.grad().clone();
    const auto ref_grads = parameter_grads(*up, ref, w);
    expect_same_grads(grads, ref_grads, 1e-11);
    EXPECT_LT(max_abs_diff(x_grad, x_ref.grad()), 1e-11);
  }
}

TEST(CrosswayDecoderEquivalence, MishViaExpIsMish) {
  // Across the range, at the exp cap (20) and past float's exp overflow (88.7).
  const at::Tensor x = at::cat({at::linspace(-100, 100, 4001, at::kDouble),
                                at::tensor({-1e30, -88.0, -20.0, -1e-6, 0.0, 1e-6, 19.9, 20.0, 20.1, 89.0, 1e30},
                                           at::kDouble)});
  for (auto dtype : {at::kDouble, at::kFloat}) {
    const at::Tensor xf = x.to(dtype).clone().requires_grad_(), xr = x.to(dtype).clone().requires_grad_();
    const at::Tensor fast = mish_via_exp(xf), ref = at::mish(xr);
    fast.sum().backward();
    ref.sum().backward();
    ASSERT_FALSE(fast.isnan().any().item<bool>() || xf.grad().isnan().any().item<bool>());
    const double tolerance = dtype == at::kDouble ? 1e-14 : 3e-7;  // relative, values; gradients absolute
    EXPECT_LT(((fast - ref).abs() / ref.abs().clamp_min(1e-30)).max().item<double>(), tolerance) << dtype;
    EXPECT_LT(max_abs_diff(xf.grad(), xr.grad()), dtype == at::kDouble ? 1e-14 : 3e-6) << dtype;
  }
  // Conv2dBlock computes its Sequential (conv, GroupNorm, torch::nn::Mish) with it.
  at::manual_seed(1);
  Conv2dBlock block(4, 6, 3, 2);
  block->to(at::kDouble);
  const at::Tensor input = at::randn({2, 4, 5, 5}, at::kDouble);
  const at::Tensor out = block->forward(input);
  const at::Tensor ref = block->named_children()["block"]->as<torch::nn::Sequential>()->forward(input);
  EXPECT_LT(max_abs_diff(out, ref), 1e-13);
  const at::Tensor w = at::randn(ref.sizes(), at::kDouble);
  expect_same_grads(parameter_grads(*block, out, w), parameter_grads(*block, ref, w), 1e-12);
}

TEST(CrosswayDecoderEquivalence, SharedChannelsGiveTheConcatenatedInputsResult) {
  // 6 + 4 -> 8: residual conv on the concatenation; 6 + 4 -> 10: identity residual. x full
  // (5 x 4), or a tile repeated over 11 x 10: 2 x 2 and 3 x 3 tiles, kernels 3 and 5, so that the
  // short tiling (2 pad + period rows, = 11 mod period) is shorter than the map.
  struct Case {
    int64_t out_channels, kernel, tile_h, tile_w, height, width;
  };
  for (const Case& c : {Case{8, 3, 5, 4, 5, 4}, Case{10, 3, 5, 4, 5, 4}, Case{8, 3, 2, 2, 11, 10},
                        Case{8, 5, 2, 2, 11, 10}, Case{10, 5, 3, 3, 11, 10}, Case{8, 5, 1, 1, 11, 10}}) {
    at::manual_seed(c.out_channels + c.kernel);
    ResidualBlock2D block(10, c.out_channels, c.kernel, /*n_groups=*/2);
    block->to(at::kDouble);
    const at::Tensor x = at::randn({3, 6, c.tile_h, c.tile_w}, at::kDouble).requires_grad_();
    const at::Tensor shared = at::randn({1, 4, c.height, c.width}, at::kDouble);
    const at::Tensor fast = block->forward_with_shared(x, shared);
    const at::Tensor x_ref = x.detach().clone().requires_grad_();
    const at::Tensor ref = block->forward(at::cat({tile_2d(x_ref, c.height, c.width), shared.expand({3, -1, -1, -1})}, 1));
    ASSERT_EQ(fast.sizes(), ref.sizes());
    const std::string name = "out " + std::to_string(c.out_channels) + ", kernel " + std::to_string(c.kernel) +
                             ", tile " + std::to_string(c.tile_h) + "x" + std::to_string(c.tile_w);
    EXPECT_LT(max_abs_diff(fast, ref), 1e-12) << name;
    const at::Tensor w = at::randn(ref.sizes(), at::kDouble);
    expect_same_grads(parameter_grads(*block, fast, w), parameter_grads(*block, ref, w), 1e-11);
    EXPECT_LT(max_abs_diff(x.grad(), x_ref.grad()), 1e-11) << name;
  }
  // tile_2d is the original's repeat-then-crop.
  const at::Tensor tile = at::arange(6, at::kDouble).view({1, 1, 2, 3});
  EXPECT_TRUE(at::equal(tile_2d(tile, 3, 4), tile.repeat({1, 1, 2, 2}).slice(2, 0, 3).slice(3, 0, 4)));
  ResidualBlock2D block(10, 8, 3, 2);
  EXPECT_THROW(block->forward_with_shared(at::randn({3, 6, 5, 4}), at::randn({3, 4, 5, 4})), UsageError);
  EXPECT_THROW(block->forward_with_shared(at::randn({3, 6, 5, 4}), at::randn({1, 3, 5, 4})), UsageError);
  EXPECT_THROW(block->forward_with_shared(at::randn({3, 6, 6, 4}), at::randn({1, 4, 5, 4})), UsageError);
}

TEST(CrosswayDecoderEquivalence, DecoderMatchesItsLevelsOnConcatenatedGrids) {
  CrosswayDecoderOptions o;
  o.feature_dim = 32;
  o.decode_dims = {8, 16, 16};  // two levels
  o.decode_pe_dim = 8;
  o.image_height = 44;  // the first level 11 x 10: the 2 x 2 grid through a short tiling
  o.image_width = 40;
  o.kernel_size = 3;
  o.n_groups = 4;
  at::manual_seed(0);
  CrosswayDecoder decoder(o);
  decoder.to(at::kDouble);
  const at::Tensor mid = at::randn({2, 32, 4}, at::kDouble);
  const at::Tensor fast = decoder.forward(mid);
  // The original's loop: cat the grid to every sample, run the level as one Sequential.
  at::Tensor x = decoder.grid_features(mid);
  auto blocks = decoder.named_children()["blocks"]->as<torch::nn::ModuleList>();
  for (const auto& level : *blocks) {
    const at::Tensor pe = crossway_positional_grid(x.size(0), o.decode_pe_dim, x.size(2), x.size(3), x.options());
    x = level->as<torch::nn::Sequential>()->forward(at::cat({x, pe}, 1));
  }
  const at::Tensor ref = decoder.named_children()["final_conv"]->as<torch::nn::Sequential>()->forward(x);
  ASSERT_EQ(fast.sizes(), at::IntArrayRef({4, 3, 44, 40}));
  EXPECT_LT(max_abs_diff(fast, ref), 1e-12);
  const at::Tensor w = at::randn(ref.sizes(), at::kDouble);
  expect_same_grads(parameter_grads(decoder, fast, w), parameter_grads(decoder, ref, w), 1e-11);
}

TEST(CrosswayDecoderWidth, UnetScaledDimsFollowTheOriginalsAssertion) {
  // mid_dim / (n_obs_steps * decode_resolution^2) is the last entry, the paper's 1:2 kept.
  EXPECT_EQ(crossway_decode_dims_for_unet(2048, 2, 2), (std::vector<int64_t>{128, 256}));  // Crossway's U-Net
  EXPECT_EQ(crossway_decode_dims_for_unet(1024, 2, 2), (std::vector<int64_t>{64, 128}));   // Diffusion Policy's
  EXPECT_EQ(crossway_decode_dims_for_unet(256, 2, 2), (std::vector<int64_t>{16, 32}));     // policy-demo's
  EXPECT_EQ(crossway_decode_dims_for_unet(256, 1, 2, {32, 64, 128}), (std::vector<int64_t>{16, 32, 64}));
  EXPECT_THROW(crossway_decode_dims_for_unet(250, 2, 2), UsageError);
  EXPECT_THROW(crossway_decode_dims_for_unet(8, 2, 2, {3, 8}), UsageError);  // 3 * 1 / 8
  // The demo's decoder at that width builds and decodes 48 x 48 frames.
  CrosswayDecoderOptions o;
  o.feature_dim = 256;
  o.decode_dims = crossway_decode_dims_for_unet(256, 2, 2);
  o.image_height = o.image_width = 48;
  CrosswayDecoder decoder(o);
  at::NoGradGuard no_grad;
  EXPECT_EQ(decoder.forward(at::randn({1, 256, 4})).sizes(), at::IntArrayRef({2, 3, 48, 48}));
}

}  // namespace
}  // namespace sparsevit::policy
