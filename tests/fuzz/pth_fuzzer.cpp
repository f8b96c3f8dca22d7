// torch.save .pth files through LibTorch's zip reader and our restricted unpickler: any bytes give
// a value tree of allowed types or sparsevit::RuntimeError; nothing is executed and nothing
// crashes. Seeds are PyTorch-written files (tests/weights/fixtures).
#include <cstdint>
#include <string_view>

#include "util/errors.h"
#include "weights/pth_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const c10::IValue root =
        sparsevit::weights::parse_pth(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.pth");
    sparsevit::weights::state_dict_from_pth(root, "fuzz.pth");
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
