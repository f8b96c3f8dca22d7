// Sparse Transformer (Child et al. 2019), bidirectional adaptation (mask: sparse_transformer).
// strided: the first ceil(H/2) heads attend |j-k| < w, the others (j-k) mod l = 0, where the
//          local width w (`local`) defaults to the stride l as in the paper's l = w; setting it
//          apart reaches budgets a single l cannot (98.47% pruning at N = 197: local 2, stride 65).
// fixed:   the first ceil(H/2) heads attend within their block of l tokens, the others attend
//          the last `summary` tokens of every block.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "patterns/mask_generators.h"
#include "patterns/sequences.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr ChoiceKwarg kMode{"mode", "strided", "`strided` | `fixed`"};
constexpr IntKwarg kSummary{"summary", 1, "`fixed`: the last c tokens of every block are attended by all queries"};

Pattern build_sparse_transformer(const MaskContext& ctx, const MaskKwargs& kw) {
  const std::string mode = kMode.read(kw, {"strided", "fixed"});
  const int64_t default_stride = static_cast<int64_t>(isqrt(static_cast<uint64_t>(ctx.num_tokens - 1))) + 1;
  const int64_t stride = kw.get_int("stride", default_stride, 1);  // default ceil(sqrt(N)) for N > 1
  const int64_t summary = kSummary.read(kw, 1, stride);
  const int64_t local_width = kw.get_int("local", stride, 1);
  if (mode == "fixed" && kw.has("local"))
    throw UsageError(kw.describe("local") + ": only `mode: strided` has a local width (`fixed` uses its blocks)");
  const auto globals = class_token_globals(ctx, kw);
  const int32_t first = globals.empty() ? 0 : ctx.num_prefix_tokens;
  const int32_t local_heads = (ctx.num_heads + 1) / 2;

  Pattern pattern(ctx.num_tokens, ctx.num_heads, ctx.num_prefix_tokens);
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    const bool local = h < local_heads;
    pattern.set_window(h, mode == "strided" && local ? local_width : stride);
    if (mode == "strided") {
      std::vector<int32_t> offsets;
      if (local) {
        for (int64_t o = 0; o < std::min<int64_t>(local_width, ctx.num_tokens); ++o)
          offsets.push_back(static_cast<int32_t>(o));
      } else {
        for (int64_t o = 0; o < ctx.num_tokens; o += stride) offsets.push_back(static_cast<int32_t>(o));
      }
      pattern.set_head_diagonals(h, DiagonalStructure{offsets, globals});
      continue;
    }
    pattern.set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
      if (j < first) {  // class token row is global
        keys.resize(ctx.num_tokens);
        std::iota(keys.begin(), keys.end(), 0);
        return;
      }
      const int64_t p = j - first;
      for (int32_t k = first; k < ctx.num_tokens; ++k) {
        const int64_t q = k - first;
        const bool keep = local ? (p / stride == q / stride) : (q % stride >= stride - summary);
        if (keep) keys.push_back(k);
      }
      keys.insert(keys.end(), globals.begin(), globals.end());
    });
  }
  return pattern;
}

}  // namespace

MaskGenerator sparse_transformer_generator() {
  return MaskGenerator{
      "sparse_transformer",
      "Sparse Transformer (Child et al. 2019), bidirectional: half the heads local, half strided / summary",
      {
          kMode.doc_entry(),
          {"stride", "ceil(sqrt(N))", "l: stride of the strided heads (strided), block length (fixed)"},
          {"local", "stride", "`strided`: the local heads attend |j-k| < local (the paper ties it to the stride)"},
          kSummary.doc_entry(),
          class_token_kwarg_doc(),
      },
      false,
      build_sparse_transformer,
  };
}

}  // namespace sparsevit::patterns
