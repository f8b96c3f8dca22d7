// The .npy readers: `mask: pruning` scores (float32) and the typed reader (util/npy_array) behind
// `mask: file`: any file either gives one layer's scores for a small model / a typed array, or a
// clear error.
#include <cstdint>

#include "fuzz_support.h"
#include "patterns/pruning_mask.h"
#include "util/errors.h"
#include "util/npy_array.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sparsevit::fuzz::TempFile file(data, size, ".npy");
  try {
    sparsevit::patterns::MaskContext context;
    context.num_tokens = 10;
    context.num_prefix_tokens = 1;
    context.num_heads = 2;
    context.head_dim = 8;
    context.num_layers = 3;
    context.layer = 1;
    sparsevit::patterns::load_layer_scores(file.path(), context);
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  try {
    const sparsevit::NpyArray array = sparsevit::read_npy_array(file.path(), "fuzz");
    if (array.count() > 0)
      (void)(array.dtype == sparsevit::NpyDtype::kFloat32 ? array.float_at(array.count() - 1)
                                                        : static_cast<float>(array.int_at(array.count() - 1)));
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
