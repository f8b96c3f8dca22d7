// Declarations of the generators the registry lists, and helpers they share.
// One generator per file: fibottention_mask.cpp, local_mask.cpp, ...
#pragma once

#include <cstdint>
#include <vector>

#include "patterns/mask_registry.h"

namespace sparsevit::patterns {

MaskGenerator fibottention_generator();
MaskGenerator local_generator();
MaskGenerator random_generator();
MaskGenerator sparse_transformer_generator();
MaskGenerator bigbird_generator();
MaskGenerator longformer_generator();
MaskGenerator pruning_generator();
MaskGenerator file_generator();  // file_mask.cpp
MaskGenerator topk_generator();

// The `class_token` kwarg shared by every generator: `global` (default when the model has a
// class token) connects row 0 and column 0 fully; `none` treats token 0 like any other token.
KwargDoc class_token_kwarg_doc();
bool class_token_is_global(const MaskContext& context, const MaskKwargs& kwargs);
// The global tokens implied by the class-token setting: {0} or {}.
std::vector<int32_t> class_token_globals(const MaskContext& context, const MaskKwargs& kwargs);

// Number of patch-pair edges (both tokens >= prefix) of the symmetric offset set `offsets`
// over P patch tokens: sum over o of (o == 0 ? P : 2 (P - o)).
int64_t diagonal_patch_edges(const std::vector<int32_t>& offsets, int32_t num_patches);

// The integer in [lo, hi] whose pruning ratio (a non-increasing function) is closest to the
// target, ties going to the sparser side. Used to meet a `pruning_ratio` budget.
int64_t closest_to_target(int64_t lo, int64_t hi, double target, const std::function<double(int64_t)>& ratio);

}  // namespace sparsevit::patterns
