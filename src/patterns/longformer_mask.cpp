// Longformer (mask: longformer): a sliding window per layer (smaller in lower layers),
// dilated windows on a few heads of the upper layers, the class token global.
#include <string>

#include "patterns/mask_generators.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr IntKwarg kWindow{"window", 2, "half-width w (|j-k| <= w), or a list with one window per layer"};
constexpr IntKwarg kDilation{"dilation", 2, "dilation d of the dilated heads: offsets 0, d, ..., w*d"};
constexpr IntKwarg kDilatedHeads{"dilated_heads", 0,
                                 "how many heads (the first ones) use the dilated window in upper layers"};

Pattern build_longformer(const MaskContext& ctx, const MaskKwargs& kw) {
  int64_t window = 0;
  if (kw.is_list("window")) {
    const auto windows = kw.get_int_list("window", 0);
    if (static_cast<int32_t>(windows.size()) != ctx.num_layers)
      throw UsageError(kw.describe("window") + ": a list needs one window per layer (" +
                       std::to_string(ctx.num_layers) + "), got " + std::to_string(windows.size()));
    window = windows[ctx.layer];
  } else {
    window = kWindow.read(kw, 0);
  }
  const int64_t dilation = kDilation.read(kw, 1);
  const int64_t dilated_heads = kDilatedHeads.read(kw, 0, ctx.num_heads);
  const int64_t dilated_from = kw.get_int("dilated_from_layer", ctx.num_layers / 2, 0);
  const auto globals = class_token_globals(ctx, kw);
  const bool upper = ctx.layer >= dilated_from;
  const int64_t largest = ctx.num_tokens - 1;
  if (window > largest) {
    window = largest;  // offsets >= N select nothing
  }

  Pattern pattern(ctx.num_tokens, ctx.num_heads, ctx.num_prefix_tokens);
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    const int64_t step = upper && h < dilated_heads ? dilation : 1;
    std::vector<int32_t> offsets;
    for (int64_t t = 0; t <= window && t * step < ctx.num_tokens; ++t) offsets.push_back(static_cast<int32_t>(t * step));
    pattern.set_head_diagonals(h, DiagonalStructure{offsets, globals});
    // The reported reach, capped at the largest offset (and so never overflowing).
    pattern.set_window(h, window > largest / step ? largest : window * step);
  }
  return pattern;
}

}  // namespace

MaskGenerator longformer_generator() {
  return MaskGenerator{
      "longformer",
      "Longformer: sliding window per layer, dilated on some heads of the upper layers, global class token",
      {
          kWindow.doc_entry(),
          kDilation.doc_entry(),
          kDilatedHeads.doc_entry(),
          {"dilated_from_layer", "L/2", "first (0-based) layer whose heads may be dilated"},
          class_token_kwarg_doc(),
      },
      false,
      build_longformer,
  };
}

}  // namespace sparsevit::patterns
