#include "patterns/topk_mask.h"

#include <algorithm>
#include <cmath>

#include "patterns/mask_generators.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr IntKwarg kK{"k", 4, "keys kept per query"};
constexpr IntKwarg kKEnd{"k_end", 4, "scheduled k at the end of training"};
constexpr ChoiceKwarg kKSchedule{"k_schedule", "linear",
                                 "`linear` | `cosine` interpolation from k_start to k_end over the epochs"};

}  // namespace

int64_t topk_keys_per_query(const MaskContext& ctx, const MaskKwargs& kw, double progress) {
  const int64_t n = ctx.num_tokens;
  int given = kw.has("k") + kw.has("pruning_ratio") + (kw.has("k_start") || kw.has("k_end"));
  if (given > 1) throw UsageError("mask 'topk': give only one of k, pruning_ratio, k_start/k_end");
  int64_t k = kK.read(kw, 1);
  if (kw.has("pruning_ratio"))
    k = std::llround((1.0 - *kw.get_optional_double("pruning_ratio", 0.0, 1.0)) * ctx.num_patches());
  if (kw.has("k_start") || kw.has("k_end")) {
    const double start = static_cast<double>(kw.get_int("k_start", n, 1));
    const double end = static_cast<double>(kKEnd.read(kw, 1));
    const std::string schedule = kKSchedule.read(kw, {"linear", "cosine"});
    const double t = std::clamp(progress, 0.0, 1.0);
    const double w = schedule == "linear" ? t : 0.5 * (1.0 - std::cos(M_PI * t));
    k = std::llround(start + (end - start) * w);
  } else if (kw.has("k_schedule")) {
    throw UsageError(kw.describe("k_schedule") + ": needs k_start and k_end");
  }
  return std::clamp<int64_t>(k, 1, n);
}

namespace {
Pattern no_static_pattern(const MaskContext&, const MaskKwargs&) {
  throw UsageError("mask 'topk' is dynamic and has no static pattern");
}
}  // namespace

MaskGenerator topk_generator() {
  return MaskGenerator{
      "topk",
      "top-k (dynamic): every query keeps its k largest scaled scores q.k/sqrt(d), ties to the lower key",
      {
          kK.doc_entry(),
          {"pruning_ratio", "", "k = round((1 - pruning_ratio) * patch tokens)"},
          {"k_start", "N", "scheduled k at the start of training"},
          kKEnd.doc_entry(),
          kKSchedule.doc_entry(),
      },
      true,
      no_static_pattern,
  };
}

}  // namespace sparsevit::patterns
