// BigBird (mask: bigbird): a sliding window, g global tokens (full rows and columns; the
// first g tokens, class token included) and r random keys per query outside both.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "patterns/mask_generators.h"
#include "patterns/pattern_stats.h"
#include "patterns/seeded_rng.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr IntKwarg kWindow{"window", 1, "half-width w of the sliding window: |j-k| <= w"};
constexpr IntKwarg kNumGlobal{"num_global", 1, "g: the first g tokens attend to and are attended by every token"};
constexpr IntKwarg kRandomPerQuery{"random_per_query", 2,
                                   "r random keys per query, outside the window and the globals"};
constexpr IntKwarg kSeed{"seed", 0, "random seed (combined with the layer and head index)"};

Pattern bigbird_pattern(const MaskContext& ctx, int64_t window, const std::vector<int32_t>& globals,
                        int64_t random_keys, uint64_t seed) {
  Pattern pattern(ctx.num_tokens, ctx.num_heads, ctx.num_prefix_tokens);
  std::vector<char> is_global(ctx.num_tokens, 0);
  for (int32_t g : globals) is_global[g] = 1;
  std::vector<int32_t> candidates;
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    auto rng = make_rng(seed, static_cast<uint64_t>(ctx.layer), static_cast<uint64_t>(h));
    pattern.set_window(h, window);
    pattern.set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
      if (is_global[j]) {
        keys.resize(ctx.num_tokens);
        std::iota(keys.begin(), keys.end(), 0);
        return;
      }
      const int32_t lo = static_cast<int32_t>(std::max<int64_t>(0, j - window));
      const int32_t hi = static_cast<int32_t>(std::min<int64_t>(ctx.num_tokens - 1, j + window));
      for (int32_t k = lo; k <= hi; ++k) keys.push_back(k);
      keys.insert(keys.end(), globals.begin(), globals.end());
      if (random_keys <= 0) return;
      candidates.clear();
      for (int32_t k = 0; k < ctx.num_tokens; ++k)
        if (!is_global[k] && (k < lo || k > hi)) candidates.push_back(k);
      const int32_t count = static_cast<int32_t>(std::min<int64_t>(random_keys, candidates.size()));
      for (int32_t i : sample_without_replacement(rng, 0, static_cast<int32_t>(candidates.size()), count))
        keys.push_back(candidates[i]);
    });
  }
  return pattern;
}

Pattern build_bigbird(const MaskContext& ctx, const MaskKwargs& kw) {
  if (kw.has("random_per_query") && kw.has("pruning_ratio"))
    throw UsageError("mask 'bigbird': give only one of random_per_query, pruning_ratio");
  // Offsets beyond N - 1 select nothing; clamping also keeps j + window from overflowing.
  const int64_t window = std::min<int64_t>(kWindow.read(kw, 0), ctx.num_tokens - 1);
  const int64_t num_global = kNumGlobal.read(kw, 0, ctx.num_tokens);
  const uint64_t seed = static_cast<uint64_t>(kSeed.read(kw, 0));
  std::vector<int32_t> globals = class_token_globals(ctx, kw);
  for (int32_t g = 0; g < num_global; ++g) globals.push_back(g);
  std::sort(globals.begin(), globals.end());
  globals.erase(std::unique(globals.begin(), globals.end()), globals.end());

  int64_t random_keys = kRandomPerQuery.read(kw, 0);
  if (kw.has("pruning_ratio")) {
    // Meet the budget with the random part: measure window + globals, spread the rest over rows.
    const double target = *kw.get_optional_double("pruning_ratio", 0.0, 1.0);
    const Pattern base = bigbird_pattern(ctx, window, globals, 0, seed);
    const double p2 = static_cast<double>(ctx.num_patches()) * ctx.num_patches();
    const double missing = (1.0 - target) * p2 - static_cast<double>(patch_edges(base, 0));
    const int64_t free_rows = std::max<int64_t>(1, ctx.num_tokens - static_cast<int64_t>(globals.size()));
    random_keys = std::max<int64_t>(0, std::llround(missing / free_rows));
  }
  return bigbird_pattern(ctx, window, globals, random_keys, seed);
}

}  // namespace

MaskGenerator bigbird_generator() {
  return MaskGenerator{
      "bigbird",
      "BigBird: window w, the first g tokens global (class token included), r random keys per query",
      {
          kWindow.doc_entry(),
          kNumGlobal.doc_entry(),
          kRandomPerQuery.doc_entry(),
          {"pruning_ratio", "", "choose r so the pruning ratio is closest to this target"},
          kSeed.doc_entry(),
          class_token_kwarg_doc(),
      },
      false,
      build_bigbird,
  };
}

}  // namespace sparsevit::patterns
