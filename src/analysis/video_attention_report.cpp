#include "analysis/video_attention_report.h"

namespace sparsevit::analysis {

VideoAttentionReport video_attention_report(const config::AttentionSpec& spatial_spec,
                                            const config::AttentionSpec& temporal_spec,
                                            const models::VideoAttentionLayout& layout,
                                            const std::vector<std::optional<patterns::Pattern>>& spatial_layers,
                                            const std::vector<std::optional<patterns::Pattern>>& temporal_layers) {
  VideoAttentionReport r;
  r.layout = layout;
  r.spatial = spatial_layers.empty() ? attention_report(spatial_spec, layout.spatial)
                                     : attention_report(spatial_spec, layout.spatial, spatial_layers);
  r.spatial_gflops = r.spatial.attention_gflops * static_cast<double>(layout.spatial_sequences);
  r.attention_gflops_patch = r.spatial.attention_gflops_patch * static_cast<double>(layout.spatial_sequences);
  if (layout.temporal) {
    r.temporal = temporal_layers.empty() ? attention_report(temporal_spec, *layout.temporal)
                                         : attention_report(temporal_spec, *layout.temporal, temporal_layers);
    r.temporal_gflops = r.temporal->attention_gflops * static_cast<double>(layout.temporal_sequences);
    r.attention_gflops_patch += r.temporal_gflops;  // temporal sequences hold patch tokens only
  }
  r.attention_gflops = r.spatial_gflops + r.temporal_gflops;
  r.pruning_ratio = r.spatial.pruning_ratio;
  r.density = r.spatial.density;
  return r;
}

}  // namespace sparsevit::analysis
