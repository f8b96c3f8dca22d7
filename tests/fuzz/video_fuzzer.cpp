// Video decoding (FFmpeg's demuxers and decoders behind data::decode_video_bytes, from memory:
// probing, stream selection, every frame decoded and converted by libswscale), then the windowed
// read of the same bytes (data::decode_video_bytes_frames: the declared frame count, the index,
// the seek and the timestamps, or the fallback to the whole decode). The first byte's low bit
// picks 1 or 3 channels, its other 7 bits where the picked window starts (a fraction of the
// frame count the reader reports); the rest is the file.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

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
  const int64_t channels = data[0] & 1 ? 3 : 1;
  const int64_t where = data[0] >> 1;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    sparsevit::data::decode_video_bytes(bytes, channels, "<fuzz>");
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  try {
    // Four frames every 3 from `where` / 128 of the way in, clamped (so windows at the end repeat
    // the last frame, as padding does).
    const auto picked = sparsevit::data::decode_video_bytes_frames(
        bytes, channels, "<fuzz>", [where](int64_t frames, double) {
          std::vector<int64_t> indices;
          const int64_t first = frames * where / 128;
          for (int64_t k = 0; k < 4; ++k) indices.push_back(std::min(first + 3 * k, frames - 1));
          return indices;
        });
    if (picked.frames.size(1) != 4) __builtin_trap();
  } catch (const sparsevit::RuntimeError&) {
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
