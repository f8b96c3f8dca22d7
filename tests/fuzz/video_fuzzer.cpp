// Video decoding (FFmpeg's demuxers and decoders behind data::decode_video_bytes, from memory:
// probing, stream selection, every frame decoded and converted by libswscale). The first byte
// picks 1 or 3 channels; the rest is the file.
#include <cstdint>
#include <string>

#include "data/video_decoder.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Well inside libFuzzer's -rss_limit_mb=4096: a few bytes of some codecs can claim many large
  // frames, and the decoder holds the whole clip.
  sparsevit::data::detail::set_max_decoded_bytes(int64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    sparsevit::data::decode_video_bytes(bytes, data[0] & 1 ? 3 : 1, "<fuzz>");
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
