// Attention maps (`sparsevit attention-map`): per head of one layer, the class token's
// attention over the patch grid (a heat map upsampled to the image) and the full N x N matrix,
// as PNG files; from attention_probs, so backends without probabilities are a UsageError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::experiments {

struct AttentionMapConfig {
  std::string resume;          // the checkpoint
  std::string image;           // .png / .jpg, or an IDX images file (with index)
  int64_t index = -1;          // sample of the IDX file or of --dataset
  std::string dataset;         // with index: take the image from this dataset
  std::string data_path;
  std::string split = "test";
  std::string stats;           // whose mean/std normalise the image; "": --dataset, else
                               // fashion_mnist for 1-channel models, ImageNet's otherwise
  std::string output_dir;
  int64_t layer = -1;          // -1: the last layer
  int64_t cls_size = 224;      // pixels per side of the class-token maps (nearest upsampling)
  int64_t matrix_scale = 0;    // pixels per token of the N x N maps; 0: largest with side <= 600
  int64_t threads = 0;
  // Video models: the clip comes from --dataset (moving_fashion_mnist, video_list) with --index,
  // or --image as a video file or frame folder (TimeSformer's centre test view); the maps are
  // the spatial attention on frame `frame` of it.
  int64_t frame = 0;
};

struct AttentionMapSummary {
  int64_t layer = 0, heads = 0, tokens = 0, grid = 0;
  int64_t frame = -1;  // video models: the frame shown; -1 for images
  std::vector<std::string> files;  // input.png, then per head cls and full maps
  nlohmann::json to_json() const;
};

// The heat colour (black -> red -> yellow -> white) for t in [0, 1].
void heat_color(double t, uint8_t rgb[3]);

AttentionMapSummary run_attention_map(const AttentionMapConfig& config);

}  // namespace sparsevit::experiments
