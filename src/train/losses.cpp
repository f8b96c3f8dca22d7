#include "train/losses.h"

#include <string>

#include <ATen/ATen.h>

#include "util/errors.h"

namespace sparsevit::train {

namespace {

std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

void check_logits(const at::Tensor& logits) {
  if (!logits.defined() || logits.dim() != 2) {
    throw UsageError("loss: logits must be [batch, classes], got " + (logits.defined() ? shape_of(logits) : "undefined"));
  }
}

void check_smoothing(double smoothing) {
  if (!(smoothing >= 0.0 && smoothing < 1.0)) {
    throw UsageError("label smoothing must lie in [0, 1), got " + std::to_string(smoothing));
  }
}

void check_labels(const at::Tensor& labels, int64_t batch, int64_t num_classes) {
  if (!labels.defined() || labels.dim() != 1 || (batch >= 0 && labels.size(0) != batch)) {
    throw UsageError("loss: labels must be [" + (batch >= 0 ? std::to_string(batch) : std::string("batch")) + "], got " +
                     (labels.defined() ? shape_of(labels) : "undefined"));
  }
  if (at::isFloatingType(labels.scalar_type()) || labels.scalar_type() == at::kBool) {
    throw UsageError("loss: labels must be an integer tensor");
  }
  if (labels.numel() == 0) return;
  const int64_t lo = labels.min().item<int64_t>();
  const int64_t hi = labels.max().item<int64_t>();
  if (lo < 0 || hi >= num_classes) {
    throw UsageError("label " + std::to_string(lo < 0 ? lo : hi) + " is outside [0, " + std::to_string(num_classes) +
                     ") — is --nb_classes smaller than the dataset's number of classes?");
  }
}

}  // namespace

at::Tensor soft_target_cross_entropy(const at::Tensor& logits, const at::Tensor& soft_targets) {
  check_logits(logits);
  if (!soft_targets.defined() || soft_targets.sizes() != logits.sizes()) {
    throw UsageError("soft-target cross-entropy: targets " +
                     (soft_targets.defined() ? shape_of(soft_targets) : std::string("undefined")) +
                     " do not match logits " + shape_of(logits));
  }
  const at::Tensor log_probs = at::log_softmax(logits, -1);
  return (-soft_targets.to(log_probs.scalar_type()) * log_probs).sum(-1).mean();
}

at::Tensor label_smoothing_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, double smoothing) {
  check_logits(logits);
  check_smoothing(smoothing);
  check_labels(labels, logits.size(0), logits.size(1));
  const at::Tensor log_probs = at::log_softmax(logits, -1);
  const at::Tensor nll = -log_probs.gather(-1, labels.to(at::kLong).unsqueeze(1)).squeeze(1);
  if (smoothing == 0.0) return nll.mean();
  const at::Tensor smooth = -log_probs.mean(-1);
  return ((1.0 - smoothing) * nll + smoothing * smooth).mean();
}

at::Tensor one_hot_smoothed(const at::Tensor& labels, int64_t num_classes, double smoothing) {
  if (num_classes <= 0) throw UsageError("number of classes must be > 0, got " + std::to_string(num_classes));
  check_smoothing(smoothing);
  check_labels(labels, labels.defined() && labels.dim() == 1 ? labels.size(0) : -1, num_classes);
  const double off = smoothing / static_cast<double>(num_classes);
  const double on = 1.0 - smoothing + off;
  at::Tensor out = at::full({labels.size(0), num_classes}, off, labels.options().dtype(at::kFloat));
  return out.scatter_(1, labels.to(at::kLong).unsqueeze(1), on);
}

}  // namespace sparsevit::train
