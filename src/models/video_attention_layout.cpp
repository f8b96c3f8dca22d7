#include "models/video_attention_layout.h"

#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::models {

const std::string& video_attention_name(VideoAttentionType type) {
  static const std::string names[] = {"divided_space_time", "space_only", "joint_space_time"};
  return names[static_cast<int>(type)];
}

std::vector<std::string> video_attention_names() {
  return {"divided_space_time", "space_only", "joint_space_time"};
}

VideoAttentionType parse_video_attention(const std::string& name) {
  for (VideoAttentionType t : {VideoAttentionType::kDividedSpaceTime, VideoAttentionType::kSpaceOnly,
                               VideoAttentionType::kJointSpaceTime})
    if (video_attention_name(t) == name) return t;
  throw UsageError(unknown_name_message("attention type", name, video_attention_names()));
}

VideoAttentionLayout video_attention_layout(const AttentionGeometry& frame, int64_t num_frames, VideoAttentionType type) {
  if (num_frames < 1) throw UsageError("num_frames must be >= 1, got " + std::to_string(num_frames));
  VideoAttentionLayout layout;
  layout.type = type;
  layout.num_frames = num_frames;
  layout.spatial = frame;
  layout.spatial_sequences = num_frames;
  if (type == VideoAttentionType::kJointSpaceTime) {
    layout.spatial.num_tokens = frame.num_prefix_tokens + frame.num_patches() * num_frames;
    layout.spatial_sequences = 1;
  } else if (type == VideoAttentionType::kDividedSpaceTime) {
    AttentionGeometry temporal = frame;
    temporal.num_tokens = num_frames;
    temporal.num_prefix_tokens = 0;
    layout.temporal = temporal;
    layout.temporal_sequences = frame.num_patches();
  }
  return layout;
}

}  // namespace sparsevit::models
