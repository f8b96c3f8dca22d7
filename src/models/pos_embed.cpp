#include "models/pos_embed.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/upsampling.h>

#include <cmath>
#include <string>

#include "util/errors.h"

namespace sparsevit::models {

at::Tensor sincos_2d_pos_embed(int64_t embed_dim, int64_t grid_size, bool cls_token) {
  if (embed_dim < 4 || embed_dim % 4 != 0)
    throw UsageError("the sin-cos position embedding needs embed_dim divisible by 4, got " + std::to_string(embed_dim));
  const int64_t quarter = embed_dim / 4, prefix = cls_token ? 1 : 0;
  at::Tensor table = at::zeros({prefix + grid_size * grid_size, embed_dim}, at::kDouble);
  auto t = table.accessor<double, 2>();
  for (int64_t i = 0; i < grid_size; ++i)
    for (int64_t j = 0; j < grid_size; ++j) {
      const int64_t row = prefix + i * grid_size + j;
      for (int64_t k = 0; k < quarter; ++k) {
        const double omega = 1.0 / std::pow(10000.0, static_cast<double>(k) / static_cast<double>(quarter));
        const double w = static_cast<double>(j) * omega, h = static_cast<double>(i) * omega;
        t[row][k] = std::sin(w);
        t[row][quarter + k] = std::cos(w);
        t[row][2 * quarter + k] = std::sin(h);
        t[row][3 * quarter + k] = std::cos(h);
      }
    }
  return table.to(at::kFloat);
}

at::Tensor interpolate_pos_embed(const at::Tensor& pos_embed, int64_t num_prefix_tokens, int64_t new_grid) {
  if (pos_embed.dim() != 3 || pos_embed.size(0) != 1 || pos_embed.size(1) < num_prefix_tokens)
    throw UsageError("pos_embed must be [1, tokens, dim], got " + c10::str(pos_embed.sizes()));
  const int64_t patches = pos_embed.size(1) - num_prefix_tokens, dim = pos_embed.size(2);
  const auto grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(patches))));
  if (grid * grid != patches)
    throw UsageError("pos_embed has " + std::to_string(patches) + " patch positions, not a square grid");
  if (grid == new_grid) return pos_embed;
  namespace F = torch::nn::functional;
  const at::Tensor extra = pos_embed.narrow(1, 0, num_prefix_tokens);
  const at::Tensor tokens = pos_embed.narrow(1, num_prefix_tokens, patches).reshape({1, grid, grid, dim}).permute({0, 3, 1, 2});
  const at::Tensor resized = F::interpolate(tokens, F::InterpolateFuncOptions()
                                                        .size(std::vector<int64_t>{new_grid, new_grid})
                                                        .mode(torch::kBicubic)
                                                        .align_corners(false));
  return at::cat({extra, resized.permute({0, 2, 3, 1}).flatten(1, 2)}, 1);
}

}  // namespace sparsevit::models
