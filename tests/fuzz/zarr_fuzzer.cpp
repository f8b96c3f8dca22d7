// The zarr v2 array reader: the input is a .zarray text, a NUL, then the chunk files separated
// by the 4 bytes "ZCHK" (written as the array's first chunks in C order). Any store either reads
// or gives a clear error; metadata of arrays too large to fill in a fuzzer's memory is skipped.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "episodes/zarr_array.h"
#include "util/errors.h"

namespace {

void write(const std::string& path, const uint8_t* data, size_t size) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* end = data + size;
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  if (nul == nullptr) nul = end;
  std::string dir = std::string(P_tmpdir) + "/sparsevit_fuzz_zarr_XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) std::abort();
  write(dir + "/.zarray", data, static_cast<size_t>(nul - data));
  try {
    const sparsevit::episodes::ZarrArray array(dir);
    const auto& meta = array.meta();
    // The reader bounds a chunk at 1 GiB and an array at 2^40 elements; a fuzzer has less memory.
    int64_t chunk_elements = 1, chunks = array.num_elements() > 0 ? 1 : 0;
    for (size_t d = 0; d < meta.shape.size() && chunks > 0; ++d) {
      chunk_elements *= meta.chunks[d];
      chunks *= (meta.shape[d] + meta.chunks[d] - 1) / meta.chunks[d];  // <= elements: no overflow
    }
    if (array.num_elements() <= (1 << 20) && chunk_elements <= (1 << 20) && chunks <= 4096) {
      // Chunk payloads, in C order of the chunk grid.
      std::vector<int64_t> index(meta.shape.size(), 0);
      const uint8_t* at = nul == end ? end : nul + 1;
      for (int64_t c = 0; c < chunks && at < end; ++c) {
        const uint8_t* next = at;
        while (next + 4 <= end && std::memcmp(next, "ZCHK", 4) != 0) ++next;
        if (next + 4 > end) next = end;
        write(array.chunk_path(index), at, static_cast<size_t>(next - at));
        at = next == end ? end : next + 4;
        for (size_t d = index.size(); d-- > 0;) {
          const int64_t grid = (meta.shape[d] + meta.chunks[d] - 1) / meta.chunks[d];
          if (++index[d] < grid) break;
          index[d] = 0;
        }
      }
      try {
        array.read_float32();
      } catch (const sparsevit::RuntimeError&) {
      }
      try {
        array.read_int64();
      } catch (const sparsevit::RuntimeError&) {
      }
      try {
        array.read_uint8();
      } catch (const sparsevit::RuntimeError&) {
      }
    }
  } catch (const sparsevit::RuntimeError&) {
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
