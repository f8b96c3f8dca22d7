// CIFAR-10 / CIFAR-100 binary batches (the first byte picks the variant); every sample read.
#include <cstdint>

#include "data/cifar_dataset.h"
#include "fuzz_support.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using sparsevit::data::CifarDataset;
  sparsevit::fuzz::TempFile file(data + 1, size - 1, ".bin");
  try {
    const CifarDataset set({file.path()}, data[0] & 1 ? CifarDataset::Variant::kCifar100 : CifarDataset::Variant::kCifar10);
    for (int64_t i = 0; i < set.size() && i < 64; ++i) set.get(i);
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
