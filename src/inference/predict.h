// `sparsevit predict`: logits of a trained or published ViT for images or a ready-made tensor.
// The model comes from a sparsevit checkpoint (--resume: model, attention and shape as trained)
// or from a weight file with timm names (--weights + --model and the shape flags; classes, width,
// depth, patch, input size, channels and pooling are read off the weights when not given; the
// attention is dense, as published, unless --attn-cfg is given).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipelines/train_config.h"

namespace sparsevit::inference {

struct PredictOptions {
  std::string resume;   // a sparsevit checkpoint
  std::string weights;  // or a safetensors / .pth / checkpoint file with timm names
  // --model, --nb_classes, --attn_cfg, --attn_set, the shape flags, --dataset (normalisation of
  // image inputs), --batch_size, --threads, --device: the training flags of the same names.
  pipelines::TrainConfig model;
  std::string input;    // an image, a folder of images, or a float32 .npy [B, C, H, W] used as is
  std::string output;   // logits [B, K] as float32 .npy ("" : not written)
  int64_t topk = 5;
};

struct Predictions {
  std::vector<std::string> names;  // one per input row: file name, or "<file.npy>[i]"
  at::Tensor logits;               // float32 [B, K]
};

// Builds the model, reads the input, runs it in eval mode in batches. UsageError / RuntimeError
// naming the file on bad input.
Predictions run_predict(const PredictOptions& options);

// "name: 3 (0.912)  7 (0.051) ..." per row: the top-k classes with softmax probabilities.
std::string format_topk(const Predictions& predictions, int64_t k);

}  // namespace sparsevit::inference
