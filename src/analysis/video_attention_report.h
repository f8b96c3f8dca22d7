// Attention cost of a TimeSformer clip (models/video_attention_layout.h): the attention
// config's report on one spatial sequence and, for divided space-time attention, the temporal
// attention's on one temporal sequence, each times the sequences a clip has.
#pragma once

#include <optional>
#include <vector>

#include "analysis/attention_report.h"
#include "config/attention_spec.h"
#include "models/video_attention_layout.h"

namespace sparsevit::analysis {

struct VideoAttentionReport {
  models::VideoAttentionLayout layout;
  AttentionReport spatial;                  // one spatial sequence (a frame; the whole clip for joint)
  std::optional<AttentionReport> temporal;  // one temporal sequence (divided_space_time)
  double spatial_gflops = 0;                // per clip: spatial.attention_gflops x spatial sequences
  double temporal_gflops = 0;               // per clip: temporal.attention_gflops x temporal sequences
  double attention_gflops = 0;              // their sum
  double attention_gflops_patch = 0;        // patch pairs only: spatial patch GFLOPs x sequences + temporal
  double pruning_ratio = 0;                 // of the spatial attention (the attention config's)
  double density = 1;
};

// From patterns already built (empty vectors: built from the specs).
VideoAttentionReport video_attention_report(const config::AttentionSpec& spatial_spec,
                                            const config::AttentionSpec& temporal_spec,
                                            const models::VideoAttentionLayout& layout,
                                            const std::vector<std::optional<patterns::Pattern>>& spatial_layers = {},
                                            const std::vector<std::optional<patterns::Pattern>>& temporal_layers = {});

}  // namespace sparsevit::analysis
