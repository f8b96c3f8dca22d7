#include "data/file_bytes.h"

#include <zlib.h>

#include <algorithm>

#include "util/errors.h"
#include "util/file_bytes.h"

namespace sparsevit::data {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& compressed, const std::string& what) {
  std::vector<uint8_t> out;
  if (compressed.size() >= 18) {
    // ISIZE (the last member's uncompressed size mod 2^32) is a good first guess.
    const std::size_t n = compressed.size();
    const uint32_t isize = static_cast<uint32_t>(compressed[n - 4]) | (static_cast<uint32_t>(compressed[n - 3]) << 8) |
                           (static_cast<uint32_t>(compressed[n - 2]) << 16) |
                           (static_cast<uint32_t>(compressed[n - 1]) << 24);
    if (isize < (1u << 30)) out.reserve(isize);
  }
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw RuntimeError("cannot decompress '" + what + "': zlib init failed");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};

  std::size_t consumed = 0;
  uint8_t chunk[1 << 16];
  while (true) {
    // zlib counts in uInt; feed at most 1 GiB at a time.
    const std::size_t remaining = compressed.size() - consumed;
    if (zs.avail_in == 0 && remaining > 0) {
      const std::size_t feed = std::min<std::size_t>(remaining, 1u << 30);
      zs.next_in = const_cast<Bytef*>(compressed.data() + consumed);
      zs.avail_in = static_cast<uInt>(feed);
      consumed += feed;
    }
    zs.next_out = chunk;
    zs.avail_out = sizeof(chunk);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof(chunk) - zs.avail_out));
    if (rc == Z_STREAM_END) {
      // Another member may follow (concatenated gzip files); trailing zero padding is ignored.
      const std::size_t left = zs.avail_in + (compressed.size() - consumed);
      if (left == 0) break;
      const uint8_t* next = zs.avail_in ? zs.next_in : compressed.data() + consumed;
      if (left >= 2 && next[0] == 0x1f && next[1] == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      bool all_zero = true;
      for (std::size_t i = 0; i < zs.avail_in && all_zero; ++i) all_zero = zs.next_in[i] == 0;
      for (std::size_t i = consumed; i < compressed.size() && all_zero; ++i) all_zero = compressed[i] == 0;
      if (all_zero) break;
      throw RuntimeError("corrupt gzip file '" + what + "': unexpected data after the compressed stream");
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == compressed.size()) {
      throw RuntimeError("truncated gzip file '" + what + "': the compressed stream ends early");
    }
    const std::string reason = zs.msg ? zs.msg : ("zlib error " + std::to_string(rc));
    throw RuntimeError("corrupt gzip file '" + what + "': " + reason);
  }
  return out;
}

std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  std::vector<uint8_t> bytes = read_file_bytes(path);
  const bool magic = bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
  if (magic) return gunzip(bytes, path);
  if (ends_with(path, ".gz")) throw RuntimeError("'" + path + "' is not a gzip file (no gzip header)");
  return bytes;
}

}  // namespace sparsevit::data
