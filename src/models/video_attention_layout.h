// How a TimeSformer's attention sees a clip of T frames of P patches (Bertasius et al. 2021):
// which sequences each attention runs on and how many of them a clip has. Torch-free, so the
// FLOP reports (`sparsevit flops`, the training summary) and the model share one definition.
//
//   divided_space_time  spatial:  T sequences of the P + 1 tokens of one frame (class token copied per frame)
//                       temporal: P sequences of the T tokens of one patch position (no class token)
//   space_only          spatial:  T sequences of P + 1 tokens (frames averaged before the head)
//   joint_space_time    spatial:  1 sequence of 1 + P * T tokens
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/attention_geometry.h"

namespace sparsevit::models {

enum class VideoAttentionType { kDividedSpaceTime, kSpaceOnly, kJointSpaceTime };

// "divided_space_time" | "space_only" | "joint_space_time" (TimeSformer's spelling).
const std::string& video_attention_name(VideoAttentionType type);
std::vector<std::string> video_attention_names();
// Throws UsageError "unknown attention type 'x' (did you mean 'y'?)".
VideoAttentionType parse_video_attention(const std::string& name);

struct VideoAttentionLayout {
  VideoAttentionType type = VideoAttentionType::kDividedSpaceTime;
  int64_t num_frames = 1;
  AttentionGeometry spatial;                 // what `attn` (the attention config) runs on
  int64_t spatial_sequences = 1;             // per clip
  std::optional<AttentionGeometry> temporal;  // what `temporal_attn` runs on (divided only)
  int64_t temporal_sequences = 0;            // per clip
};

// `frame`: one frame's geometry (P + 1 tokens, one class token, heads, head width, depth).
VideoAttentionLayout video_attention_layout(const AttentionGeometry& frame, int64_t num_frames, VideoAttentionType type);

}  // namespace sparsevit::models
