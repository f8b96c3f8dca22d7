// `mask: file`: any file (.npz CSR or .npy dense mask, told apart by its first bytes) either
// gives a valid pattern for a small fixed model or a clear error.
#include <cstdint>
#include <cstdlib>

#include "fuzz_support.h"
#include "patterns/file_mask.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sparsevit::fuzz::TempFile file(data, size, ".npz");
  sparsevit::patterns::MaskContext context;
  context.num_tokens = 10;
  context.num_prefix_tokens = 1;
  context.num_heads = 2;
  context.head_dim = 8;
  context.num_layers = 3;
  context.layer = 1;
  try {
    const sparsevit::patterns::Pattern p = sparsevit::patterns::load_pattern_file(file.path(), context);
    // What the reader accepted is a well-formed pattern: every row has keys, all in range.
    for (int32_t h = 0; h < p.num_heads(); ++h)
      for (int32_t j = 0; j < p.num_tokens(); ++j) {
        const auto& ptr = p.row_ptr(h);
        if (ptr[j + 1] <= ptr[j]) std::abort();
        for (int32_t e = ptr[j]; e < ptr[j + 1]; ++e)
          if (p.col_idx(h)[e] < 0 || p.col_idx(h)[e] >= p.num_tokens()) std::abort();
      }
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
