// Attention reports: per-layer/per-head edges, offsets and windows, pruning ratio, density
// and attention GFLOPs (docs/conventions.md), computed from the patterns the kernels run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/attention_spec.h"
#include "patterns/pattern.h"
#include "util/attention_geometry.h"

namespace sparsevit::analysis {

struct HeadReport {
  int64_t edges = 0;        // computed pairs (class token included)
  int64_t patch_edges = 0;  // pairs among patch tokens
  std::optional<std::vector<int32_t>> offsets;  // diagonal offsets when the pattern is diagonal
  std::optional<int64_t> window;
};

struct LayerReport {
  std::vector<HeadReport> heads;
  double pruning_ratio = 0;
  double density = 1;
  double mean_head_overlap = 1;  // mean pairwise Jaccard of the heads (diversity: lower is more diverse)
  double union_coverage = 1;     // share of N x N covered by some head
};

struct AttentionReport {
  AttentionGeometry geometry;
  std::string backend;
  std::string mask;           // "" when dense
  std::string kernel;
  bool dynamic = false;       // top-k: counts are nominal (k keys per query)
  int64_t keys_per_query = 0; // dynamic masks only
  // Backends without a pattern (linformer, performer, ...): edges are equivalent pairs, the
  // backend's attention multiply-adds / (2 * head_dim) (config/attention_backends.h).
  bool equivalent_pairs = false;
  std::vector<LayerReport> layers;
  double pruning_ratio = 0;
  double density = 1;
  double attention_gflops = 0;        // every computed pair, class token included
  double attention_gflops_patch = 0;  // patch pairs only (the literature's Fibottention number)
  std::vector<std::string> warnings;
};

// Builds the layers' patterns from the spec and reports on them.
AttentionReport attention_report(const config::AttentionSpec& spec, const AttentionGeometry& geometry);
// Reports on patterns already built (nullopt layers are dense, or dynamic when the spec says so).
AttentionReport attention_report(const config::AttentionSpec& spec, const AttentionGeometry& geometry,
                                 const std::vector<std::optional<patterns::Pattern>>& layers);

// The `masks --json` object.
nlohmann::json report_to_json(const AttentionReport& report);
// The readable per-layer / per-head table with totals.
std::string format_report_table(const AttentionReport& report);

}  // namespace sparsevit::analysis
