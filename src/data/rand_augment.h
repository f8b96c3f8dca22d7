// RandAugment as timm implements it (`rand-m9-n2-mstd0.5-inc1`), on float [C,H,W] tensors.
//
// Ops (timm's _RAND_TRANSFORMS / _RAND_INCREASING_TRANSFORMS, magnitude m in [0, mmax],
// level = m / 10):
//   AutoContrast, Equalize, Invert           exact PIL lookup tables on 8-bit levels
//   Rotate          +-30 * level degrees about the centre
//   ShearX/ShearY   +-0.3 * level (PIL's shear about the top-left corner)
//   TranslateX/Y    +-0.45 * level of the width / height
//   Posterize       keep int(4 * level) bits (inc: 4 - that); 8-bit levels
//   Solarize        invert levels >= int(256 * level) (inc: 256 - that)
//   SolarizeAdd     add int(110 * level) to levels < 128
//   Color, Contrast, Brightness, Sharpness   blend factor 0.1 + 1.8 * level
//                   (inc: 1 +- 0.9 * level, at least 0.1); PIL's degenerate images
// Approximations: affine ops sample bilinearly (at::grid_sampler_2d; timm picks bilinear or
// bicubic at random) and blend the fill colour at the borders; blends and affine ops keep
// float precision instead of rounding to 8 bits after each op.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/random.h"

namespace sparsevit::data {

struct RandAugmentConfig {
  double magnitude = 9;        // m
  int64_t num_ops = 2;         // n: ops per image, chosen uniformly with replacement
  double magnitude_std = 0;    // mstd: Gaussian noise on m per op; > 100 or inf: uniform in [0, m]
  double magnitude_max = 10;   // mmax: upper clip of the noisy magnitude
  bool increasing = false;     // inc: the "increasing severity" op variants
  double prob = 0.5;           // p: probability of applying each chosen op
};

// Parses timm's string: "rand" then '-'-separated sections m<float>, n<int>, mstd<float>,
// mmax<float>, inc<0|1>, p<float>. Anything else is a UsageError naming the section.
RandAugmentConfig parse_rand_augment(const std::string& spec);

class RandAugment {
 public:
  // `fill` is the colour (in [0,1], one value per channel or one for all) that affine ops
  // leave outside the source image; timm uses the dataset mean.
  explicit RandAugment(RandAugmentConfig config, std::vector<double> fill = {0.5});

  // float [C,H,W] in [0,1] -> same shape.
  at::Tensor operator()(const at::Tensor& image, Rng& rng) const;

  // The op names in the order the choice indexes them.
  const std::vector<std::string>& op_names() const;

  // Applies one op at magnitude m (no probability check, random sign drawn from rng).
  at::Tensor apply(const std::string& op, const at::Tensor& image, double magnitude, Rng& rng) const;

  const RandAugmentConfig& config() const { return config_; }

 private:
  RandAugmentConfig config_;
  std::vector<double> fill_;
};

// PIL-style affine resampling: output pixel (x, y) (continuous, pixel centres at +0.5)
// samples the input at (a x + b y + c, d x + e y + f); outside the input is `fill`.
at::Tensor affine_pil(const at::Tensor& image, const double (&coeffs)[6], const std::vector<double>& fill);

}  // namespace sparsevit::data
