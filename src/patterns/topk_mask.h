// Top-k (mask: topk) is dynamic: every query keeps its k largest scaled scores at run time.
// This header resolves k from the kwargs so reports and backends agree on it.
#pragma once

#include <cstdint>

#include "patterns/mask_registry.h"

namespace sparsevit::patterns {

// k for a given epoch fraction in [0, 1] (static k, a k_start -> k_end schedule, or a target
// pruning ratio), clamped to [1, N].
int64_t topk_keys_per_query(const MaskContext& context, const MaskKwargs& kwargs, double progress = 1.0);

}  // namespace sparsevit::patterns
