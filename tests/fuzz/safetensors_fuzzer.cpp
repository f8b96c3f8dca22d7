// safetensors files: weights::parse_safetensors over the input bytes; the result is tensors or
// sparsevit::RuntimeError. Every tensor is read once, so a bad copy shows up under ASan.
#include <cstdint>
#include <string_view>

#include "util/errors.h"
#include "weights/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto contents =
        sparsevit::weights::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& entry : contents.tensors) (void)entry.second.sum();
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
