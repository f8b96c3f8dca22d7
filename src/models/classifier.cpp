#include "models/classifier.h"

#include "models/vision_transformer.h"

namespace sparsevit::models {

std::vector<int64_t> Classifier::input_shape() const {
  const VitConfig& c = config();
  if (num_frames() > 0) return {c.in_chans, num_frames(), c.img_size, c.img_size};
  return {c.in_chans, c.img_size, c.img_size};
}

}  // namespace sparsevit::models
