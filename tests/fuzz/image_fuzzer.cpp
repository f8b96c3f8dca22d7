// PNG / JPEG decoding (libpng, libturbojpeg) of image-folder datasets and attention-map inputs.
#include <cstdint>

#include "data/image_codec.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    sparsevit::data::decode_image(data + 1, size - 1, data[0] & 1 ? 3 : 1, "<fuzz>");
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
