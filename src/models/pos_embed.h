// Position embeddings of MAE (util/pos_embed.py): the fixed 2-D sin-cos table of pretraining and
// the bicubic resize of a learned table when a checkpoint's grid differs from the model's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace sparsevit::models {

// MAE's get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token) as float32
// [(1 +) grid*grid, embed_dim]: for the patch in row i, column j, the first half of the
// dimensions encode j and the second half i (MAE's meshgrid(w, h) order), each as
// [sin(pos * omega_k), cos(pos * omega_k)] with omega_k = 1 / 10000^(k / (embed_dim / 4)),
// computed in float64; the class token's row (cls_token) is zeros. embed_dim % 4 == 0.
at::Tensor sincos_2d_pos_embed(int64_t embed_dim, int64_t grid_size, bool cls_token);

// MAE's interpolate_pos_embed: pos_embed [1, prefix + g*g, C] resized to [1, prefix + new_grid^2, C]
// (bicubic, align_corners false, prefix tokens kept). Returned unchanged when g == new_grid;
// UsageError when the patch part is not a square grid.
at::Tensor interpolate_pos_embed(const at::Tensor& pos_embed, int64_t num_prefix_tokens, int64_t new_grid);

}  // namespace sparsevit::models
