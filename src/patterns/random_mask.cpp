// Random attention (mask: random): every query attends to r keys drawn uniformly without
// replacement, fixed at construction and reproducible from (seed, layer, head).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "patterns/mask_generators.h"
#include "patterns/seeded_rng.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr IntKwarg kKeysPerQuery{"keys_per_query", 4, "r, keys drawn per query"};
constexpr IntKwarg kSeed{"seed", 0, "random seed (combined with the layer and head index)"};

Pattern build_random(const MaskContext& ctx, const MaskKwargs& kw) {
  int given = 0;
  for (const char* k : {"keys_per_query", "density", "pruning_ratio"}) given += kw.has(k);
  if (given > 1) throw UsageError("mask 'random': give only one of keys_per_query, density, pruning_ratio");

  const auto globals = class_token_globals(ctx, kw);
  const int32_t first_key = globals.empty() ? 0 : ctx.num_prefix_tokens;  // draw among patch keys
  const int64_t candidates = ctx.num_tokens - first_key;
  int64_t r = kKeysPerQuery.read(kw, 0);
  if (kw.has("density")) r = std::llround(*kw.get_optional_double("density", 0.0, 1.0) * candidates);
  if (kw.has("pruning_ratio"))
    r = std::llround((1.0 - *kw.get_optional_double("pruning_ratio", 0.0, 1.0)) * candidates);
  r = std::min(r, candidates);
  const uint64_t seed = static_cast<uint64_t>(kSeed.read(kw, 0));

  Pattern pattern(ctx.num_tokens, ctx.num_heads, ctx.num_prefix_tokens);
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    auto rng = make_rng(seed, static_cast<uint64_t>(ctx.layer), static_cast<uint64_t>(h));
    pattern.set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
      if (!globals.empty() && j < first_key) {  // the class token row is global
        keys.resize(ctx.num_tokens);
        std::iota(keys.begin(), keys.end(), 0);
        return;
      }
      keys = sample_without_replacement(rng, first_key, ctx.num_tokens, static_cast<int32_t>(r));
      keys.insert(keys.end(), globals.begin(), globals.end());
    });
  }
  return pattern;
}

}  // namespace

MaskGenerator random_generator() {
  return MaskGenerator{
      "random",
      "random: every query attends to r keys drawn uniformly without replacement (fixed per seed)",
      {
          kKeysPerQuery.doc_entry(),
          {"density", "", "r = round(density * candidate keys) instead of keys_per_query"},
          {"pruning_ratio", "", "r = round((1 - pruning_ratio) * patch tokens)"},
          kSeed.doc_entry(),
          class_token_kwarg_doc(),
      },
      false,
      build_random,
  };
}

}  // namespace sparsevit::patterns
