// The .npz reader (util/npz_file, libzip) behind `mask: file`: any file either lists its members
// and reads each as a typed array, or gives a clear error.
#include <cstdint>

#include "fuzz_support.h"
#include "util/errors.h"
#include "util/npz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sparsevit::fuzz::TempFile file(data, size, ".npz");
  try {
    const sparsevit::NpzReader npz(file.path(), "fuzz");
    for (const auto& name : npz.members()) {
      try {
        const sparsevit::NpyArray array = npz.read(name);
        if (array.dtype != sparsevit::NpyDtype::kFloat32 && array.count() > 0) (void)array.int_at(array.count() - 1);
      } catch (const sparsevit::RuntimeError&) {
      }
    }
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
