// The .npy reader behind `mask: pruning` scores: any file either gives one layer's scores for a
// small model or a clear error.
#include <cstdint>

#include "fuzz_support.h"
#include "patterns/pruning_mask.h"
#include "util/errors.h"

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
  return 0;
}
