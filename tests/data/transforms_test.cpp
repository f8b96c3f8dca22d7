#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "data/rand_augment.h"
#include "data/transforms.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::expect_error;

at::Tensor random_u8(int64_t c, int64_t h, int64_t w, uint64_t seed) {
  Rng rng(seed);
  at::Tensor t = at::empty({c, h, w}, at::TensorOptions().dtype(at::kByte));
  uint8_t* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(rng() & 0xFF);
  return t;
}

at::Tensor random_image(int64_t c, int64_t h, int64_t w, uint64_t seed) { return to_float(random_u8(c, h, w, seed)); }

TEST(Transforms, ToFloatAndChannels) {
  const at::Tensor u8 = random_u8(1, 3, 4, 1);
  const at::Tensor f = to_float(u8);
  EXPECT_EQ(f.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(f * 255.0, u8.to(at::kFloat)));
  const at::Tensor rgb = match_channels(f, 3);
  ASSERT_EQ(rgb.sizes(), (at::IntArrayRef{3, 3, 4}));
  EXPECT_TRUE(at::equal(rgb[0], f[0]) && at::equal(rgb[2], f[0]));
  at::Tensor color = at::zeros({3, 1, 1});
  color[0][0][0] = 1.0;  // pure red
  EXPECT_NEAR(match_channels(color, 1).item<double>(), 0.299, 1e-6);
  EXPECT_THROW(match_channels(at::zeros({2, 2, 2}), 3), RuntimeError);
  EXPECT_EQ(match_channels(random_u8(3, 2, 2, 2), 1).scalar_type(), at::kByte);
}

TEST(Transforms, ResizeShorterAndCenterCrop) {
  const at::Tensor img = random_image(3, 20, 30, 2);
  EXPECT_EQ(resize_shorter(img, 10).sizes(), (at::IntArrayRef{3, 10, 15}));
  EXPECT_EQ(resize_shorter(img.transpose(1, 2), 10).sizes(), (at::IntArrayRef{3, 15, 10}));
  EXPECT_TRUE(at::equal(resize(img, 20, 30), img));
  const at::Tensor crop = center_crop(img, 10);
  EXPECT_TRUE(at::equal(crop, img.slice(1, 5, 15).slice(2, 10, 20)));
  // Smaller than the crop: zero padding around it.
  const at::Tensor small = center_crop(at::ones({1, 2, 2}), 4);
  EXPECT_EQ(small.sizes(), (at::IntArrayRef{1, 4, 4}));
  EXPECT_EQ(small.sum().item<double>(), 4.0);
  EXPECT_EQ(small[0][1][1].item<double>(), 1.0);
  // Resizing a constant image keeps it constant (bilinear, antialiased, both directions).
  const at::Tensor flat = at::full({1, 17, 9}, 0.25);
  EXPECT_TRUE(at::allclose(resize(flat, 5, 30), at::full({1, 5, 30}, 0.25)));
}

TEST(Transforms, RandomResizedCropBoxesFollowScaleAndRatio) {
  const RandomResizedCrop rrc(8, {0.35, 1.0}, {3.0 / 4.0, 4.0 / 3.0});
  Rng rng(7);
  for (int i = 0; i < 500; ++i) {
    const CropBox b = rrc.sample_box(28, 28, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 28);
    ASSERT_LE(b.left + b.width, 28);
    const double area = static_cast<double>(b.height * b.width) / (28.0 * 28.0);
    EXPECT_GE(area, 0.30);  // rounding of the sides
    EXPECT_LE(area, 1.0);
  }
  EXPECT_EQ(rrc(random_image(1, 28, 28, 3), rng).sizes(), (at::IntArrayRef{1, 8, 8}));
  EXPECT_EQ(rrc(random_image(3, 40, 13, 3), rng).sizes(), (at::IntArrayRef{3, 8, 8}));
}

TEST(Transforms, RandomResizedCropFallsBackToCentreCrop) {
  // A full-area square cannot fit a 10x20 image: all ten tries fail, the fallback takes the
  // largest centred crop with ratio 1.
  const RandomResizedCrop rrc(5, {1.0, 1.0}, {1.0, 1.0});
  Rng rng(1);
  const CropBox b = rrc.sample_box(10, 20, rng);
  EXPECT_EQ(b.top, 0);
  EXPECT_EQ(b.left, 5);
  EXPECT_EQ(b.height, 10);
  EXPECT_EQ(b.width, 10);
  const CropBox tall = rrc.sample_box(20, 10, rng);
  EXPECT_EQ(tall.top, 5);
  EXPECT_EQ(tall.height, 10);
  EXPECT_THROW(RandomResizedCrop(5, {0.0, 1.0}), UsageError);
  EXPECT_THROW(RandomResizedCrop(5, {0.5, 1.0}, {2.0, 1.0}), UsageError);
}

TEST(Transforms, FlipIsExact) {
  const at::Tensor img = random_image(3, 5, 7, 4);
  Rng rng(0);
  EXPECT_TRUE(at::equal(RandomHorizontalFlip(1.0)(img, rng), img.flip({2})));
  EXPECT_TRUE(at::equal(RandomHorizontalFlip(0.0)(img, rng), img));
  const at::Tensor f = RandomHorizontalFlip(1.0)(img, rng);
  EXPECT_EQ(f[1][2][0].item<float>(), img[1][2][6].item<float>());
  int flipped = 0;
  for (int i = 0; i < 1000; ++i) flipped += at::equal(RandomHorizontalFlip(0.5)(img, rng), img) ? 0 : 1;
  EXPECT_GT(flipped, 420);
  EXPECT_LT(flipped, 580);
}

TEST(Transforms, NormalizeIsExact) {
  at::Tensor img = at::zeros({2, 1, 2});
  img[0][0][0] = 0.5;
  img[0][0][1] = 1.0;
  img[1][0][0] = 0.25;
  const at::Tensor out = Normalize({0.5, 0.25}, {0.25, 0.5})(img);
  EXPECT_FLOAT_EQ(out[0][0][0].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(out[0][0][1].item<float>(), 2.0f);
  EXPECT_FLOAT_EQ(out[1][0][0].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(out[1][0][1].item<float>(), -0.5f);
  EXPECT_THROW(Normalize({0.5}, {0.0}), UsageError);
  EXPECT_THROW(Normalize({0.5}, {0.5, 0.5}), UsageError);
  EXPECT_THROW(Normalize({0.5}, {0.5})(img), RuntimeError);
}

TEST(Transforms, RandomCropWithPadding) {
  const at::Tensor img = random_image(1, 8, 8, 5);
  Rng rng(3);
  bool saw_shift = false;
  for (int i = 0; i < 50; ++i) {
    const at::Tensor out = RandomCropWithPadding(8, 2)(img, rng);
    ASSERT_EQ(out.sizes(), (at::IntArrayRef{1, 8, 8}));
    saw_shift = saw_shift || !at::equal(out, img);
    // Every output is a window of the zero-padded image.
    const at::Tensor padded = at::constant_pad_nd(img, {2, 2, 2, 2}, 0);
    bool found = false;
    for (int64_t t = 0; t <= 4 && !found; ++t)
      for (int64_t l = 0; l <= 4 && !found; ++l) found = at::equal(padded.slice(1, t, t + 8).slice(2, l, l + 8), out);
    EXPECT_TRUE(found);
  }
  EXPECT_TRUE(saw_shift);
  EXPECT_TRUE(at::equal(RandomCropWithPadding(8, 0)(img, rng), img));
}

TEST(Transforms, ColorJitter) {
  const at::Tensor img = random_image(3, 6, 6, 6);
  Rng a(11), b(11);
  const at::Tensor x = ColorJitter(0.4)(img, a);
  EXPECT_TRUE(at::equal(x, ColorJitter(0.4)(img, b)));
  EXPECT_FALSE(at::equal(x, img));
  EXPECT_GE(x.min().item<float>(), 0.0f);
  EXPECT_LE(x.max().item<float>(), 1.0f);
  EXPECT_TRUE(at::equal(ColorJitter(0.0)(img, a), img));
  EXPECT_EQ(ColorJitter(0.4)(random_image(1, 6, 6, 6), a).sizes(), (at::IntArrayRef{1, 6, 6}));
}

TransformConfig small_config() {
  TransformConfig c;
  c.input_size = 28;
  c.in_chans = 3;
  c.mean = {0.2860, 0.2860, 0.2860};
  c.std = {0.3530, 0.3530, 0.3530};
  c.scale_min = 0.35;
  c.crop_pct = 1.0;
  return c;
}

TEST(Transforms, TrainPipelineShapesAndDeterminism) {
  for (const std::string crop : {"rrc", "pad", "none"}) {
    for (const std::string aa : {"", "rand-m9-mstd0.5-inc1"}) {
      TransformConfig c = small_config();
      c.train_crop = crop;
      c.auto_augment = aa;
      const Transform t = build_train_transform(c);
      const at::Tensor img = random_u8(1, 28, 28, 8);
      Rng r1(5), r2(5), r3(6);
      const at::Tensor x = t(img, r1);
      ASSERT_EQ(x.sizes(), (at::IntArrayRef{3, 28, 28})) << crop << " " << aa;
      EXPECT_EQ(x.scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(x, t(img, r2))) << crop << " " << aa;
      if (crop != "none" || !aa.empty()) {
        EXPECT_FALSE(at::equal(x, t(img, r3))) << crop << " " << aa;
      }
      // Inputs of another size and channel count reach the same output shape.
      EXPECT_EQ(t(random_u8(3, 40, 33, 9), r1).sizes(), (at::IntArrayRef{3, 28, 28}));
    }
  }
}

TEST(Transforms, EvalPipelineIsDeterministicAndNormalised) {
  TransformConfig c = small_config();
  c.in_chans = 1;
  c.mean = {0.5};
  c.std = {0.5};
  const Transform t = build_eval_transform(c);
  const at::Tensor img = random_u8(1, 28, 28, 10);
  Rng r1(1), r2(2);
  const at::Tensor x = t(img, r1);
  EXPECT_TRUE(at::equal(x, t(img, r2)));
  // crop_pct 1 at the native size: exactly (x/255 - 0.5) / 0.5.
  EXPECT_TRUE(at::allclose(x, (img.to(at::kFloat) / 255.0 - 0.5) / 0.5, 1e-6, 1e-6));
  c.in_chans = 3;
  c.mean.clear();
  c.std.clear();
  c.input_size = 16;
  c.crop_pct = 0.875;
  EXPECT_EQ(build_eval_transform(c)(random_u8(3, 50, 30, 1), r1).sizes(), (at::IntArrayRef{3, 16, 16}));
}

// timm's RandomErasing: p = 1 always erases one box of 2%..33% of the image with aspect ratio in
// [0.3, 3.3]; pixel mode fills it with N(0, 1) values, const with zeros; p = 0 never erases.
TEST(Transforms, RandomErasingBoxesFollowTimm) {
  const at::Tensor image = at::full({3, 32, 32}, 7.0f);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Rng rng(seed);
    const at::Tensor out = RandomErasing(1.0, "pixel")(image, rng);
    const at::Tensor erased = out.ne(7.0f).any(0);  // [H, W]
    const int64_t area = erased.sum().item<int64_t>();
    ASSERT_GT(area, 0) << seed;
    EXPECT_GE(area, static_cast<int64_t>(0.02 * 1024 * 0.5)) << seed;
    EXPECT_LE(area, static_cast<int64_t>(1024 / 3.0 * 1.5)) << seed;
    const at::Tensor rows = erased.any(1).nonzero(), cols = erased.any(0).nonzero();
    const int64_t h = rows.max().item<int64_t>() - rows.min().item<int64_t>() + 1;
    const int64_t w = cols.max().item<int64_t>() - cols.min().item<int64_t>() + 1;
    EXPECT_EQ(h * w, area) << "one rectangle";
    EXPECT_EQ(image[0][0][0].item<float>(), 7.0f) << "the input is not modified";
  }
  Rng rng(1);
  const at::Tensor zeros = RandomErasing(1.0, "const")(image, rng);
  EXPECT_GT(zeros.eq(0.0f).sum().item<int64_t>(), 0);
  EXPECT_TRUE(zeros.eq(0.0f).logical_or(zeros.eq(7.0f)).all().item<bool>());
  const at::Tensor per_channel = RandomErasing(1.0, "rand")(image, rng);
  const at::Tensor box = per_channel[0].ne(7.0f);
  EXPECT_EQ(std::get<0>(at::_unique(per_channel[0].masked_select(box))).numel(), 1) << "rand: one value per channel";
  EXPECT_TRUE(RandomErasing(0.0, "pixel")(image, rng).equal(image));
  expect_error<UsageError>([] { RandomErasing(1.5, "pixel"); }, {"probability"});
  expect_error<UsageError>([] { RandomErasing(0.5, "noise"); }, {"pixel, rand or const"});
}

// train_crop auto: RandomResizedCrop for ImageNet-sized inputs, padding crops for 28x28 / 32x32.
TEST(Transforms, AutoTrainCropAndErasingInThePipeline) {
  TransformConfig c = transform_config_for("imagenet", 64, 3);
  c.train_crop = "auto";
  c.re_prob = 1.0;
  c.re_mode = "const";
  const at::Tensor image = at::full({3, 64, 64}, 128, at::kByte);
  Rng rng(3);
  const at::Tensor out = build_train_transform(c)(image, rng);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{3, 64, 64}));
  EXPECT_GT(out.eq(0.0f).sum().item<int64_t>(), 0) << "erased after Normalize";
  c.re_count = 0;
  EXPECT_THROW(validate(c), UsageError);
}

TEST(Transforms, ConfigValidation) {
  TransformConfig c = small_config();
  c.train_crop = "random";
  expect_error<UsageError>([&] { build_train_transform(c); }, {"train crop 'random'"});
  c = small_config();
  c.mean = {0.5};
  expect_error<UsageError>([&] { build_train_transform(c); }, {"mean and std need 3 values"});
  c = small_config();
  c.crop_pct = 0;
  EXPECT_THROW(build_eval_transform(c), UsageError);
  c = small_config();
  c.auto_augment = "rand-m9-q3";
  expect_error<UsageError>([&] { build_train_transform(c); }, {"q3"});
}

TEST(Transforms, RandAugmentStringParsing) {
  RandAugmentConfig c = parse_rand_augment("rand-m9-mstd0.5-inc1");
  EXPECT_EQ(c.magnitude, 9);
  EXPECT_EQ(c.num_ops, 2);
  EXPECT_EQ(c.magnitude_std, 0.5);
  EXPECT_TRUE(c.increasing);
  c = parse_rand_augment("rand-m7-n3-mstd1-mmax12-p0.7");
  EXPECT_EQ(c.magnitude, 7);
  EXPECT_EQ(c.num_ops, 3);
  EXPECT_EQ(c.magnitude_max, 12);
  EXPECT_EQ(c.prob, 0.7);
  EXPECT_FALSE(c.increasing);
  EXPECT_EQ(parse_rand_augment("rand").num_ops, 2);
  for (const std::string bad : {"augmix-m5", "rand-m9-x3", "rand-mfoo", "rand-n2.5", "rand-inc2", "rand-m", "rand--m9",
                                "rand-p1.5", "rand-m9x", ""}) {
    EXPECT_THROW(parse_rand_augment(bad), UsageError) << bad;
  }
  expect_error<UsageError>([] { parse_rand_augment("rand-m9-w0"); }, {"unknown RandAugment section 'w0'"});
}

TEST(Transforms, RandAugmentOpsKeepShapeAndRange) {
  for (bool inc : {false, true}) {
    RandAugmentConfig cfg;
    cfg.increasing = inc;
    const RandAugment ra(cfg, {0.5, 0.4, 0.3});
    const at::Tensor img = random_image(3, 12, 10, 12);
    Rng rng(4);
    ASSERT_EQ(ra.op_names().size(), 15u);
    for (const std::string& op : ra.op_names()) {
      for (double m : {0.0, 5.0, 10.0}) {
        const at::Tensor out = ra.apply(op, img, m, rng);
        ASSERT_EQ(out.sizes(), img.sizes()) << op;
        EXPECT_GE(out.min().item<float>(), 0.0f) << op;
        EXPECT_LE(out.max().item<float>(), 1.0f) << op;
      }
    }
  }
}

TEST(Transforms, RandAugmentKnownCases) {
  RandAugment ra(RandAugmentConfig{}, {0.0});
  Rng rng(0);
  at::Tensor img = at::tensor({0.0f, 50.0f, 100.0f, 200.0f}).view({1, 2, 2}) / 255.0;
  // Posterize at m=10 keeps 4 bits; Solarize at m=5 inverts levels >= 128.
  const at::Tensor post = ra.apply("Posterize", at::full({1, 1, 1}, 0x37 / 255.0), 10.0, rng);
  EXPECT_NEAR(post.item<double>() * 255.0, 0x30, 1e-4);
  const at::Tensor sol = ra.apply("Solarize", img, 5.0, rng) * 255.0;
  EXPECT_NEAR(sol[0][1][1].item<double>(), 55.0, 1e-4);
  EXPECT_NEAR(sol[0][1][0].item<double>(), 100.0, 1e-4);
  // AutoContrast stretches [0, 200] to [0, 255] by PIL's table, int(v * 255.0 / 200): the top
  // level lands on 254 (200 * 1.275 rounds below 255 in binary), as in PIL.
  const at::Tensor ac = ra.apply("AutoContrast", img, 0.0, rng) * 255.0;
  EXPECT_NEAR(ac[0][1][1].item<double>(), 254.0, 1e-4);
  EXPECT_NEAR(ac[0][0][0].item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(ac[0][0][1].item<double>(), 63.0, 1e-4);  // int(50 * 255 / 200)
  EXPECT_TRUE(at::allclose(ra.apply("Invert", img, 0.0, rng), 1.0 - img));
  // Equalize: four levels, 256 pixels each; PIL's table maps them to 0, 85, 171, 255.
  const at::Tensor levels = at::tensor({0.0f, 50.0f, 100.0f, 200.0f}).repeat_interleave(256).view({1, 32, 32}) / 255.0;
  const at::Tensor eq = ra.apply("Equalize", levels, 0.0, rng).flatten() * 255.0;
  EXPECT_NEAR(eq[0].item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(eq[256].item<double>(), 85.0, 1e-4);
  EXPECT_NEAR(eq[512].item<double>(), 171.0, 1e-4);
  EXPECT_NEAR(eq[1023].item<double>(), 255.0, 1e-4);
  // Zero-magnitude geometry is the identity.
  const at::Tensor photo = random_image(3, 9, 11, 3);
  for (const std::string op : {"Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"}) {
    EXPECT_TRUE(at::allclose(ra.apply(op, photo, 0.0, rng), photo, 1e-5, 1e-5)) << op;
  }
}

TEST(Transforms, AffineShiftIsExactWithFill) {
  const at::Tensor img = random_image(1, 4, 6, 13);
  const double shift[6] = {1, 0, 2, 0, 1, 0};  // output x samples input x + 2
  const at::Tensor out = affine_pil(img, shift, {0.5});
  EXPECT_TRUE(at::allclose(out.slice(2, 0, 4), img.slice(2, 2, 6), 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(out.slice(2, 4, 6), at::full({1, 4, 2}, 0.5), 1e-6, 1e-6));
  // Rotating by 90 degrees four times (exactly representable on a square image) is the identity.
  RandAugment ra(RandAugmentConfig{}, {0.0});
  const at::Tensor sq = random_image(1, 6, 6, 14);
  const double pi = 3.14159265358979323846;
  const double c = std::cos(pi / 2), s = std::sin(pi / 2);
  double rot[6] = {c, s, 0, -s, c, 0};
  rot[2] = rot[0] * -3 + rot[1] * -3 + 3;
  rot[5] = rot[3] * -3 + rot[4] * -3 + 3;
  at::Tensor x = sq;
  for (int i = 0; i < 4; ++i) x = affine_pil(x, rot, {0.0});
  EXPECT_TRUE(at::allclose(x, sq, 1e-4, 1e-4));
  // out[r][c] = in[5 - c][r]: PIL's rotate(-90), clockwise.
  EXPECT_TRUE(at::allclose(affine_pil(sq, rot, {0.0}), sq.transpose(1, 2).flip({2}), 1e-4, 1e-4));
}

TEST(Transforms, RandAugmentIsDeterministicUnderASeed) {
  const RandAugment ra(parse_rand_augment("rand-m9-n3-mstd0.5-inc1"), {0.5});
  const at::Tensor img = random_image(3, 16, 16, 15);
  Rng a(99), b(99);
  int changed = 0;
  for (int i = 0; i < 20; ++i) {
    const at::Tensor x = ra(img, a);
    EXPECT_TRUE(at::equal(x, ra(img, b)));
    changed += at::equal(x, img) ? 0 : 1;
  }
  EXPECT_GT(changed, 10);
}

}  // namespace
}  // namespace sparsevit::data
