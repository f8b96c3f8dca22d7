// Static pruning: keep, per head, the highest-mass edges of a calibrated attention map until
// the requested pruning ratio is met, at least one key per row.
#pragma once

#include <string>
#include <vector>

#include "patterns/mask_registry.h"

namespace sparsevit::patterns {

// Attention mass of one layer: scores[h][j * N + k] for head h, query j, key k.
using LayerScores = std::vector<std::vector<float>>;

// Keeps each row's best key, then the heaviest patch pairs (ties: lower (j,k)) until the
// head's pruning ratio reaches `pruning_ratio`. Global tokens are kept and not counted.
Pattern prune_by_scores(const MaskContext& context, const LayerScores& scores, double pruning_ratio,
                        const std::vector<int32_t>& global_tokens);

// Reads a float32 .npy map shaped [L, H, N, N] (or [H, N, N], shared by all layers) and
// returns layer `layer`'s scores. Throws RuntimeError naming the file when it is unusable.
LayerScores load_layer_scores(const std::string& path, const MaskContext& context);

}  // namespace sparsevit::patterns
