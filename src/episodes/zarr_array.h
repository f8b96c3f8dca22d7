// One array of a zarr v2 directory store (https://zarr.readthedocs.io/en/stable/spec/v2.html):
// its `.zarray` metadata, checked, and its values converted to the type the caller needs.
// What is read: C order; dtypes <f4 <f8 <i8 <i4 |u1; compressor null, blosc (any codec the
// installed Blosc has), zlib or gzip; no filters; chunk keys with "." or "/" separators;
// missing chunks read as the fill value; edge chunks stored full size. Everything else is a
// RuntimeError naming the array, as are corrupt chunks. Standard library, Blosc and zlib.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sparsevit::episodes {

enum class ZarrDtype { kFloat32, kFloat64, kInt64, kInt32, kUint8 };
enum class ZarrCompressor { kNone, kBlosc, kZlib, kGzip };

struct ZarrArrayMeta {
  std::vector<int64_t> shape, chunks;
  ZarrDtype dtype = ZarrDtype::kFloat32;
  std::string dtype_text;  // as written, e.g. "<f4"
  int64_t item_size = 4;
  ZarrCompressor compressor = ZarrCompressor::kNone;
  char dimension_separator = '.';
  std::array<uint8_t, 8> fill_bytes{};  // one element in the array's dtype (null fill_value: zeros)
};

// Limits against absurd metadata: a chunk is decompressed into one buffer (Blosc cannot hold
// more than 2 GiB anyway) and an array's element count must fit in memory as bytes.
inline constexpr int64_t kMaxZarrChunkBytes = int64_t{1} << 30;
inline constexpr int64_t kMaxZarrElements = int64_t{1} << 40;
inline constexpr size_t kMaxZarrDims = 32;

class ZarrArray {
 public:
  // Reads `dir`/.zarray; RuntimeError "DIR: what" for a missing, malformed or unsupported one.
  explicit ZarrArray(std::string dir);

  const std::string& dir() const { return dir_; }
  const ZarrArrayMeta& meta() const { return meta_; }
  const std::vector<int64_t>& shape() const { return meta_.shape; }
  int64_t num_elements() const { return num_elements_; }

  // All values in C order, converted. Integers read as float32 may round; float64 to float32
  // rounds. read_int64 refuses non-integral or out-of-range floats; read_uint8 refuses values
  // outside [0, 255] (and NaN) and rounds floats to the nearest integer.
  std::vector<float> read_float32() const;
  std::vector<int64_t> read_int64() const;
  std::vector<uint8_t> read_uint8() const;

  // The decoded bytes of chunk `index` (full chunk shape, little-endian elements): the file
  // decompressed, or the fill value when the chunk file does not exist.
  std::vector<uint8_t> read_chunk(const std::vector<int64_t>& index) const;
  // The chunk file's path (whether or not it exists).
  std::string chunk_path(const std::vector<int64_t>& index) const;

 private:
  template <typename Dst>
  std::vector<Dst> read_all() const;

  std::string dir_;
  ZarrArrayMeta meta_;
  int64_t num_elements_ = 0;
  int64_t chunk_elements_ = 0;
};

}  // namespace sparsevit::episodes
