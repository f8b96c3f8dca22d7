// format_report_table: the readable table of an attention report (`sparsevit masks`), apart
// from the report itself so that what needs no {fmt} (the JSON, the Python package's core) links
// without it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "analysis/attention_report.h"

namespace sparsevit::analysis {

std::string format_report_table(const AttentionReport& r) {
  std::string out;
  const auto& s = r.geometry;
  out += fmt::format("attention: backend={} mask={}{}  tokens={} heads={} layers={} head_dim={}\n", r.backend,
                     r.equivalent_pairs ? "none" : r.mask.empty() ? "none (dense)" : r.mask,
                     r.dynamic ? " (dynamic)" : "", s.num_tokens, s.num_heads, s.num_layers, s.head_dim);
  if (r.equivalent_pairs)
    out += "edges are equivalent pairs: the backend's attention multiply-adds / (2 * head_dim)\n";
  const double patch_pairs = static_cast<double>(s.num_tokens - s.num_prefix_tokens) * (s.num_tokens - s.num_prefix_tokens);
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const auto& layer = r.layers[l];
    out += fmt::format("\nlayer {:>2}  pruning {:.4f}  density {:.4f}  head overlap {:.3f}  coverage {:.3f}\n", l,
                       layer.pruning_ratio, layer.density, layer.mean_head_overlap, layer.union_coverage);
    out += fmt::format("  {:>4}  {:>6}  {:>9}  {:>8}  {}\n", "head", "window", "edges", "pruning", "offsets");
    for (std::size_t h = 0; h < layer.heads.size(); ++h) {
      const auto& head = layer.heads[h];
      const std::string window = head.window ? std::to_string(*head.window) : "-";
      const std::string offsets = head.offsets ? fmt::format("{}", fmt::join(*head.offsets, " ")) : "-";
      const double pruning = patch_pairs > 0 ? 1.0 - head.patch_edges / patch_pairs : 0.0;
      out += fmt::format("  {:>4}  {:>6}  {:>9}  {:>8.4f}  {}\n", h, window, head.edges, pruning, offsets);
    }
  }
  out += fmt::format(
      "\ntotal: pruning ratio {:.4f} ({:.2f}% of patch pairs skipped)  density {:.4f}\n"
      "attention GFLOPs (d_head={}): {:.6f} all pairs, {:.6f} patch pairs only\n",
      r.pruning_ratio, 100 * r.pruning_ratio, r.density, s.head_dim, r.attention_gflops, r.attention_gflops_patch);
  return out;
}

}  // namespace sparsevit::analysis
