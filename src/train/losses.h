// Classification losses of the DeiT / MAE recipe (timm.loss): soft-target cross-entropy for
// mixup/cutmix targets, label-smoothing cross-entropy otherwise. Both return the batch mean.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace sparsevit::train {

// timm's SoftTargetCrossEntropy: mean over the batch of sum_c -target[c] * log_softmax(logits)[c].
// logits [B, C], soft_targets [B, C] (float). Throws UsageError on shape mismatch.
at::Tensor soft_target_cross_entropy(const at::Tensor& logits, const at::Tensor& soft_targets);

// timm's LabelSmoothingCrossEntropy: mean over the batch of
// (1 - smoothing) * nll(label) + smoothing * mean_c(-log_softmax(logits)[c]).
// logits [B, C], labels [B] (integer). smoothing = 0 is plain cross-entropy.
at::Tensor label_smoothing_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, double smoothing);

// timm's smoothed one-hot: off = smoothing / C everywhere, on = 1 - smoothing + off at the label.
// Rows sum to 1. Returns float32 [B, C] on the labels' device. Throws UsageError when a label
// lies outside [0, num_classes) (usually --nb_classes smaller than the dataset's classes).
at::Tensor one_hot_smoothed(const at::Tensor& labels, int64_t num_classes, double smoothing);

}  // namespace sparsevit::train
