// Statistics of a Pattern, with the conventions of docs/conventions.md (tests pin them).
#pragma once

#include <cstdint>
#include <vector>

#include "patterns/pattern.h"

namespace sparsevit::patterns {

// |Omega_h ∩ patches^2|: ordered pairs (j,k) with both tokens past the prefix (class) tokens.
int64_t patch_edges(const Pattern& p, int32_t h);

// Literature pruning ratio of one head: (P^2 - |Omega ∩ patches^2|) / P^2, P = patch tokens.
double head_pruning_ratio(const Pattern& p, int32_t h);
// Averaged over heads (one layer) or over heads and layers.
double pruning_ratio(const Pattern& p);
double pruning_ratio(const std::vector<Pattern>& layers);

// Share of all N x N pairs the kernel computes (class token included), over heads / layers.
double density(const Pattern& p);
double density(const std::vector<Pattern>& layers);

// Jaccard overlap |A ∩ B| / |A ∪ B| of two heads' edge sets (1 when both are empty).
double head_jaccard(const Pattern& p, int32_t a, int32_t b);
// H x H matrix of pairwise Jaccard overlaps.
std::vector<std::vector<double>> head_overlap(const Pattern& p);
// |∪_h Omega_h| / N^2: how much of the matrix the heads cover together.
double union_coverage(const Pattern& p);

// Attention multiply-add GFLOPs (Q·K^T plus P·V) for `pairs` computed pairs: 2·d·pairs/1e9.
double attention_gflops_for_pairs(double pairs, int64_t head_dim);
// Of one layer's pattern: over all computed pairs, or over patch pairs only.
double attention_gflops(const Pattern& p, int64_t head_dim);
double attention_gflops_patch(const Pattern& p, int64_t head_dim);

}  // namespace sparsevit::patterns
