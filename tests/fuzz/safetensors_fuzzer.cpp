// safetensors files (what timm publishes, what `finetune --finetune` and `predict --weights` read):
// any bytes give tensors or sparsevit::RuntimeError, never a crash or an over-read.
#include <cstdint>
#include <string_view>

#include "util/errors.h"
#include "weights/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    sparsevit::weights::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
