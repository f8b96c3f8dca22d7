// torch.save zip files: weights::parse_pth (zip directory check, LibTorch's zip reader, our
// restricted unpickler) then state_dict_from_pth; the result is tensors or sparsevit::RuntimeError.
#include <cstdint>
#include <string_view>

#include "util/errors.h"
#include "weights/pth_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const c10::IValue root =
        sparsevit::weights::parse_pth(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& entry : sparsevit::weights::state_dict_from_pth(root, "fuzz")) (void)entry.second.sum();
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
