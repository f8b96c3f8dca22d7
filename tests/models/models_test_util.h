// What several models suites share: the tiny TimeSformer's geometry, attention specs from YAML text,
// and substring checks of parameter names.
#pragma once

#include <cstdint>
#include <string>

#include "config/attention_spec.h"

namespace sparsevit::models::test_util {

// The tiny TimeSformer of timesformer_test and video_pretrained_weights_test: 8x8 frames in 2x2
// patches (16 a frame), 2 channels, width 16, 3 layers, 2 heads, 5 classes.
constexpr int64_t kImg = 8, kPatch = 2, kChans = 2, kDim = 16, kDepth = 3, kHeads = 2, kClasses = 5;

inline config::AttentionSpec spec_of(const std::string& yaml) {
  return config::parse_attention_spec(yaml, "test.yaml");
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace sparsevit::models::test_util
