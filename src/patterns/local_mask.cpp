// Structured local / dilated attention (mask: local): |j-k| <= w, offsets multiples of d.
#include <algorithm>
#include <string>

#include "patterns/mask_generators.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

constexpr IntKwarg kWindow{"window", 2, "half-width w: keys with |j-k| <= w"};
constexpr IntKwarg kDilation{"dilation", 1, "only offsets that are multiples of d"};
constexpr BoolKwarg kIncludeDiagonal{"include_diagonal", true, "keep the main diagonal j = k"};

std::vector<int32_t> local_offsets(int64_t window, int64_t dilation, bool include_diagonal) {
  std::vector<int32_t> offsets;
  if (include_diagonal) offsets.push_back(0);
  for (int64_t o = dilation; o <= window; o += dilation) offsets.push_back(static_cast<int32_t>(o));
  return offsets;
}

Pattern build_local(const MaskContext& ctx, const MaskKwargs& kw) {
  const int64_t dilation = kDilation.read(kw, 1);
  const bool include_diagonal = kIncludeDiagonal.read(kw);
  int given = 0;
  for (const char* k : {"window", "head_windows", "layer_windows", "pruning_ratio"}) given += kw.has(k);
  if (given > 1)
    throw UsageError("mask 'local': give only one of window, head_windows, layer_windows, pruning_ratio");

  const int64_t largest = ctx.num_tokens - 1;
  std::vector<int64_t> windows(ctx.num_heads, kWindow.read(kw, 0));
  if (kw.has("head_windows")) {
    windows = kw.get_int_list("head_windows", 0);
    if (static_cast<int32_t>(windows.size()) != ctx.num_heads)
      throw UsageError(kw.describe("head_windows") + ": needs one window per head (" +
                       std::to_string(ctx.num_heads) + "), got " + std::to_string(windows.size()));
  } else if (kw.has("layer_windows")) {
    const auto per_layer = kw.get_int_list("layer_windows", 0);
    if (static_cast<int32_t>(per_layer.size()) != ctx.num_layers)
      throw UsageError(kw.describe("layer_windows") + ": needs one window per layer (" +
                       std::to_string(ctx.num_layers) + "), got " + std::to_string(per_layer.size()));
    windows.assign(ctx.num_heads, per_layer[ctx.layer]);
  } else if (kw.has("pruning_ratio")) {
    const double target = *kw.get_optional_double("pruning_ratio", 0.0, 1.0);
    const double p2 = static_cast<double>(ctx.num_patches()) * ctx.num_patches();
    const int64_t w = closest_to_target(0, std::max<int64_t>(0, ctx.num_patches() - 1), target, [&](int64_t w) {
      return 1.0 - diagonal_patch_edges(local_offsets(w, dilation, include_diagonal), ctx.num_patches()) / p2;
    });
    windows.assign(ctx.num_heads, w);
  }

  Pattern pattern(ctx.num_tokens, ctx.num_heads, ctx.num_prefix_tokens);
  const auto globals = class_token_globals(ctx, kw);
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    int64_t w = windows[h];
    if (w > largest) {
      pattern.add_warning("local: window " + std::to_string(w) + " exceeds the largest offset " +
                          std::to_string(largest) + "; clamped");
      w = largest;
    }
    pattern.set_head_diagonals(h, DiagonalStructure{local_offsets(w, dilation, include_diagonal), globals});
    pattern.set_window(h, w);
  }
  return pattern;
}

}  // namespace

MaskGenerator local_generator() {
  return MaskGenerator{
      "local",
      "structured local / dilated window: |j-k| <= w, offsets multiples of the dilation d",
      {
          kWindow.doc_entry(),
          kDilation.doc_entry(),
          kIncludeDiagonal.doc_entry(),
          {"head_windows", "", "one window per head (list of H)"},
          {"layer_windows", "", "one window per layer (list of L), e.g. growing with depth"},
          {"pruning_ratio", "", "pick the window whose pruning ratio is closest to this target"},
          class_token_kwarg_doc(),
      },
      false,
      build_local,
  };
}

}  // namespace sparsevit::patterns
