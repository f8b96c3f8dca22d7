// IDX (MNIST layout) images + labels, plain or gzip: the first two bytes give the length of the
// images part (the rest is the labels file). Every sample is read back.
#include <cstdint>

#include "data/idx_dataset.h"
#include "fuzz_support.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t split = std::min<size_t>(size - 2, (static_cast<size_t>(data[0]) << 8) | data[1]);
  sparsevit::fuzz::TempFile images(data + 2, split), labels(data + 2 + split, size - 2 - split);
  try {
    const sparsevit::data::IdxDataset set(images.path(), labels.path());
    for (int64_t i = 0; i < set.size() && i < 64; ++i) set.get(i);
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
