#include "episodes/zarr_array.h"

#include <blosc.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "util/errors.h"
#include "util/file_bytes.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "zarr elements are read from little-endian bytes as is: a big-endian host needs byte swaps"
#endif

namespace sparsevit::episodes {
namespace {

constexpr int64_t kMaxMetadataBytes = 1 << 20;

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw RuntimeError(where + ": " + what); }

// -1 when the file does not exist; RuntimeError for anything but a regular file.
int64_t file_size_or_missing(const std::string& path, const std::string& where) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return -1;
    fail(where, "cannot stat " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) fail(where, path + " is not a regular file");
  return static_cast<int64_t>(st.st_size);
}

std::vector<int64_t> dims_field(const nlohmann::json& meta, const char* field, bool positive, const std::string& where) {
  if (!meta.contains(field) || !meta[field].is_array())
    fail(where, std::string(".zarray \"") + field + "\" is missing or not a list");
  const auto& list = meta[field];
  if (list.empty()) fail(where, std::string(".zarray \"") + field + "\" is empty (0-d arrays are not read)");
  if (list.size() > kMaxZarrDims)
    fail(where, std::string(".zarray \"") + field + "\" has more than " + std::to_string(kMaxZarrDims) + " dimensions");
  std::vector<int64_t> dims;
  for (const auto& value : list) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() > static_cast<uint64_t>(kMaxZarrElements) ||
        (positive && value.get<uint64_t>() == 0))
      fail(where, std::string(".zarray \"") + field + "\" holds " + value.dump() + ", expected an integer in [" +
                      (positive ? "1" : "0") + ", 2^40]");
    dims.push_back(value.get<int64_t>());
  }
  return dims;
}

void parse_dtype(const nlohmann::json& meta, ZarrArrayMeta& out, const std::string& where) {
  if (!meta.contains("dtype")) fail(where, ".zarray has no \"dtype\"");
  if (!meta["dtype"].is_string()) fail(where, "structured dtype " + meta["dtype"].dump() + " is not supported");
  const std::string text = meta["dtype"].get<std::string>();
  out.dtype_text = text;
  struct Known {
    const char* code;
    ZarrDtype dtype;
    int64_t size;
  };
  static const Known kKnown[] = {{"f4", ZarrDtype::kFloat32, 4}, {"f8", ZarrDtype::kFloat64, 8},
                                 {"i8", ZarrDtype::kInt64, 8},   {"i4", ZarrDtype::kInt32, 4},
                                 {"u1", ZarrDtype::kUint8, 1}};
  if (text.size() == 3) {
    for (const Known& k : kKnown) {
      if (text.compare(1, 2, k.code) != 0) continue;
      const char order = text[0];
      // One-byte types have no byte order: numpy writes '|', but '<' and '>' mean the same.
      if (order == '<' || (k.size == 1 && (order == '|' || order == '>'))) {
        out.dtype = k.dtype;
        out.item_size = k.size;
        return;
      }
      if (order == '>') fail(where, "big-endian dtype '" + text + "' is not supported (rewrite the array little-endian)");
    }
  }
  if (!text.empty() && text.find('O') != std::string::npos)
    fail(where, "object dtype '" + text + "' is not supported (only numeric arrays)");
  fail(where, "dtype '" + text + "' is not supported (<f4 <f8 <i8 <i4 |u1)");
}

template <typename T>
void store_fill(ZarrArrayMeta& out, T value) {
  std::memcpy(out.fill_bytes.data(), &value, sizeof(T));
}

void parse_fill_value(const nlohmann::json& meta, ZarrArrayMeta& out, const std::string& where) {
  out.fill_bytes.fill(0);
  if (!meta.contains("fill_value") || meta["fill_value"].is_null()) return;  // no fill: zeros
  const auto& fill = meta["fill_value"];
  const bool is_float = out.dtype == ZarrDtype::kFloat32 || out.dtype == ZarrDtype::kFloat64;
  if (is_float) {
    double value = 0;
    if (fill.is_number()) {
      value = fill.get<double>();
    } else if (fill == "NaN") {
      value = std::numeric_limits<double>::quiet_NaN();
    } else if (fill == "Infinity") {
      value = std::numeric_limits<double>::infinity();
    } else if (fill == "-Infinity") {
      value = -std::numeric_limits<double>::infinity();
    } else {
      fail(where, ".zarray \"fill_value\" " + fill.dump() + " is not a number");
    }
    if (out.dtype == ZarrDtype::kFloat32)
      store_fill(out, static_cast<float>(value));
    else
      store_fill(out, value);
    return;
  }
  if (!fill.is_number_integer()) fail(where, ".zarray \"fill_value\" " + fill.dump() + " is not an integer");
  int64_t low = std::numeric_limits<int64_t>::min(), high = std::numeric_limits<int64_t>::max();
  if (out.dtype == ZarrDtype::kInt32) low = std::numeric_limits<int32_t>::min(), high = std::numeric_limits<int32_t>::max();
  if (out.dtype == ZarrDtype::kUint8) low = 0, high = 255;
  if (fill.is_number_unsigned() ? fill.get<uint64_t>() > static_cast<uint64_t>(high)
                                : fill.get<int64_t>() < low || fill.get<int64_t>() > high)
    fail(where, ".zarray \"fill_value\" " + fill.dump() + " does not fit dtype '" + out.dtype_text + "'");
  const int64_t value = fill.get<int64_t>();
  if (out.dtype == ZarrDtype::kInt64) store_fill(out, value);
  if (out.dtype == ZarrDtype::kInt32) store_fill(out, static_cast<int32_t>(value));
  if (out.dtype == ZarrDtype::kUint8) store_fill(out, static_cast<uint8_t>(value));
}

void parse_compressor(const nlohmann::json& meta, ZarrArrayMeta& out, const std::string& where) {
  if (!meta.contains("compressor") || meta["compressor"].is_null()) {
    out.compressor = ZarrCompressor::kNone;
    return;
  }
  const auto& compressor = meta["compressor"];
  if (!compressor.is_object() || !compressor.contains("id") || !compressor["id"].is_string())
    fail(where, ".zarray \"compressor\" is not an object with an \"id\"");
  const std::string id = compressor["id"].get<std::string>();
  // Blosc's header names its codec and shuffle, zlib's stream is self-describing: the other
  // compressor fields (cname, clevel, shuffle, level) are for the writer only.
  if (id == "blosc")
    out.compressor = ZarrCompressor::kBlosc;
  else if (id == "zlib")
    out.compressor = ZarrCompressor::kZlib;
  else if (id == "gzip")
    out.compressor = ZarrCompressor::kGzip;
  else
    fail(where, "compressor '" + id + "' is not supported (blosc, zlib, gzip or none)");
}

// Converters from a stored element to what the caller asked for; false when the value does not fit.
template <typename Dst>
struct Convert;

template <>
struct Convert<float> {
  static constexpr const char* kWhat = "float32";
  template <typename Src>
  static bool from(Src v, float& out) {
    out = static_cast<float>(v);
    return true;
  }
};

template <>
struct Convert<int64_t> {
  static constexpr const char* kWhat = "int64 (an integer)";
  template <typename Src>
  static bool from(Src v, int64_t& out) {
    if constexpr (std::is_floating_point_v<Src>) {
      if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || std::trunc(v) != v) return false;
    }
    out = static_cast<int64_t>(v);
    return true;
  }
};

template <>
struct Convert<uint8_t> {
  static constexpr const char* kWhat = "uint8 (a value in [0, 255])";
  template <typename Src>
  static bool from(Src v, uint8_t& out) {
    if constexpr (std::is_floating_point_v<Src>) {
      if (!(v >= 0 && v <= 255)) return false;  // NaN fails too
      out = static_cast<uint8_t>(std::lround(v));
    } else {
      if constexpr (std::is_signed_v<Src>) {
        if (v < 0) return false;
      }
      if (v > 255) return false;
      out = static_cast<uint8_t>(v);
    }
    return true;
  }
};

template <typename Src>
std::string value_text(Src v) {
  if constexpr (std::is_floating_point_v<Src>)
    return std::to_string(static_cast<double>(v));
  else
    return std::to_string(static_cast<int64_t>(v));
}

// The part of one chunk that lies inside the array, C order: every index of the dims before
// `run_dim` inside the chunk's extent, times one contiguous run. Trailing dims whose chunk spans
// the whole array dim have the same layout in chunk and array, so the run covers them all
// (PushT's images: one run per chunk instead of one per pixel).
struct ChunkCopy {
  std::vector<int64_t> extent;        // elements of the chunk inside the array, per dim
  std::vector<int64_t> chunk_stride;  // element strides inside the (full) chunk
  std::vector<int64_t> array_stride;  // element strides in the array
  size_t run_dim = 0;                 // dims from here on form one contiguous run
  int64_t array_offset = 0;           // the chunk's first element in the array
};

template <typename Src, typename Dst>
void copy_chunk(const uint8_t* chunk, const ChunkCopy& copy, Dst* out, const std::string& where) {
  for (int64_t e : copy.extent)
    if (e == 0) return;
  const size_t outer = copy.run_dim;
  const int64_t run = copy.extent[outer] * copy.chunk_stride[outer];
  std::vector<int64_t> counter(outer, 0);
  while (true) {
    int64_t src = 0, dst = copy.array_offset;
    for (size_t d = 0; d < outer; ++d) {
      src += counter[d] * copy.chunk_stride[d];
      dst += counter[d] * copy.array_stride[d];
    }
    for (int64_t i = 0; i < run; ++i) {
      Src value;
      std::memcpy(&value, chunk + (src + i) * static_cast<int64_t>(sizeof(Src)), sizeof(Src));
      if (!Convert<Dst>::from(value, out[dst + i]))
        fail(where, "element " + std::to_string(dst + i) + " = " + value_text(value) + " cannot be read as " +
                        Convert<Dst>::kWhat);
    }
    // Next index of the outer dims (odometer, last outer dim fastest).
    size_t d = outer;
    while (true) {
      if (d == 0) return;
      --d;
      if (++counter[d] < copy.extent[d]) break;
      counter[d] = 0;
    }
  }
}

}  // namespace

ZarrArray::ZarrArray(std::string dir) : dir_(std::move(dir)) {
  const std::string meta_path = dir_ + "/.zarray";
  const int64_t meta_size = file_size_or_missing(meta_path, dir_);
  if (meta_size < 0) {
    if (file_size_or_missing(dir_ + "/zarr.json", dir_) >= 0) fail(dir_, "zarr v3 arrays are not supported (v2 only)");
    fail(dir_, "not a zarr array (no .zarray)");
  }
  if (meta_size > kMaxMetadataBytes) fail(dir_, ".zarray is larger than 1 MiB (not zarr metadata)");
  const std::vector<uint8_t> text = read_file_bytes(meta_path, kMaxMetadataBytes);
  const nlohmann::json meta = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object()) fail(dir_, ".zarray is not a JSON object");

  if (!meta.contains("zarr_format") || meta["zarr_format"] != 2)
    fail(dir_, ".zarray \"zarr_format\" is " + (meta.contains("zarr_format") ? meta["zarr_format"].dump() : "missing") +
                   ", only zarr v2 is read");
  meta_.shape = dims_field(meta, "shape", false, dir_);
  meta_.chunks = dims_field(meta, "chunks", true, dir_);
  if (meta_.chunks.size() != meta_.shape.size())
    fail(dir_, ".zarray \"chunks\" has " + std::to_string(meta_.chunks.size()) + " dimensions, \"shape\" has " +
                   std::to_string(meta_.shape.size()));
  parse_dtype(meta, meta_, dir_);
  if (meta.contains("order") && meta["order"] != "C")
    fail(dir_, ".zarray \"order\" is " + meta["order"].dump() + ": only C order is read (not Fortran order)");
  if (meta.contains("filters") && !meta["filters"].is_null() && !(meta["filters"].is_array() && meta["filters"].empty()))
    fail(dir_, ".zarray \"filters\" are not supported (only null)");
  parse_compressor(meta, meta_, dir_);
  parse_fill_value(meta, meta_, dir_);
  if (meta.contains("dimension_separator")) {
    const auto& separator = meta["dimension_separator"];
    if (separator == ".")
      meta_.dimension_separator = '.';
    else if (separator == "/")
      meta_.dimension_separator = '/';
    else
      fail(dir_, ".zarray \"dimension_separator\" " + separator.dump() + " is not \".\" or \"/\"");
  }

  num_elements_ = 1;
  for (int64_t d : meta_.shape)
    if (__builtin_mul_overflow(num_elements_, d, &num_elements_) || num_elements_ > kMaxZarrElements)
      fail(dir_, "shape has more than 2^40 elements");
  chunk_elements_ = 1;
  for (int64_t c : meta_.chunks)
    if (__builtin_mul_overflow(chunk_elements_, c, &chunk_elements_) ||
        chunk_elements_ > kMaxZarrChunkBytes / meta_.item_size)
      fail(dir_, "a chunk would hold more than 1 GiB");
}

std::string ZarrArray::chunk_path(const std::vector<int64_t>& index) const {
  std::string path = dir_ + "/";
  for (size_t d = 0; d < index.size(); ++d) {
    if (d > 0) path += meta_.dimension_separator;
    path += std::to_string(index[d]);
  }
  return path;
}

std::vector<uint8_t> ZarrArray::read_chunk(const std::vector<int64_t>& index) const {
  const int64_t bytes = chunk_elements_ * meta_.item_size;
  const std::string path = chunk_path(index);
  const int64_t size = file_size_or_missing(path, dir_);
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  if (size < 0) {  // never written: every element is the fill value
    for (int64_t i = 0; i < bytes; i += meta_.item_size)
      std::memcpy(out.data() + i, meta_.fill_bytes.data(), static_cast<size_t>(meta_.item_size));
    return out;
  }
  const std::string chunk = "chunk " + path;
  // Compressed data never exceeds these bounds; a larger file is not this array's chunk.
  int64_t max_size = bytes;
  if (meta_.compressor == ZarrCompressor::kBlosc) max_size = bytes + BLOSC_MAX_OVERHEAD;
  if (meta_.compressor == ZarrCompressor::kZlib || meta_.compressor == ZarrCompressor::kGzip)
    max_size = static_cast<int64_t>(compressBound(static_cast<uLong>(bytes))) + 1024;
  if (size > max_size)
    fail(dir_, chunk + " has " + std::to_string(size) + " bytes, more than a chunk of " + std::to_string(bytes) +
                   " bytes can compress to");
  const std::vector<uint8_t> stored = read_file_bytes(path, static_cast<uint64_t>(max_size));

  switch (meta_.compressor) {
    case ZarrCompressor::kNone:
      // The bytes read, not the size stat saw: the file may have changed in between.
      if (static_cast<int64_t>(stored.size()) != bytes)
        fail(dir_, chunk + " has " + std::to_string(stored.size()) + " bytes, expected " + std::to_string(bytes) +
                       " (uncompressed chunk)");
      return stored;
    case ZarrCompressor::kBlosc: {
      size_t nbytes = 0;
      if (blosc_cbuffer_validate(stored.data(), stored.size(), &nbytes) != 0)
        fail(dir_, chunk + " is not a valid Blosc buffer");
      if (static_cast<int64_t>(nbytes) != bytes)
        fail(dir_, chunk + " decompresses to " + std::to_string(nbytes) + " bytes, expected " + std::to_string(bytes));
      const int n = blosc_decompress_ctx(stored.data(), out.data(), out.size(), /*numinternalthreads=*/1);
      if (n != bytes) {
        const char* codec = blosc_cbuffer_complib(stored.data());
        fail(dir_, chunk + " cannot be decompressed by Blosc (corrupt, or its codec '" +
                       std::string(codec ? codec : "?") + "' is missing from this Blosc build)");
      }
      return out;
    }
    case ZarrCompressor::kZlib:
    case ZarrCompressor::kGzip: {
      z_stream stream{};
      if (inflateInit2(&stream, 15 + 32) != Z_OK) fail(dir_, "zlib cannot start inflating " + chunk);  // zlib or gzip
      stream.next_in = const_cast<Bytef*>(stored.data());
      stream.avail_in = static_cast<uInt>(stored.size());
      stream.next_out = out.data();
      stream.avail_out = static_cast<uInt>(out.size());
      const int status = inflate(&stream, Z_FINISH);
      const bool out_full = stream.avail_out == 0;
      const uInt left_in = stream.avail_in;
      inflateEnd(&stream);
      if (status == Z_STREAM_END && out_full && left_in == 0) return out;
      if (status == Z_STREAM_END && !out_full)
        fail(dir_, chunk + " decompresses to fewer than " + std::to_string(bytes) + " bytes");
      if (status == Z_STREAM_END) fail(dir_, chunk + " has bytes after its compressed stream");
      if (status == Z_BUF_ERROR && out_full)
        fail(dir_, chunk + " decompresses to more than " + std::to_string(bytes) + " bytes");
      if (status == Z_BUF_ERROR) fail(dir_, chunk + " is truncated (compressed stream ends early)");
      fail(dir_, chunk + " is corrupt (" + std::string(stream.msg ? stream.msg : "inflate error") + ")");
    }
  }
  fail(dir_, "unknown compressor");
}

template <typename Dst>
std::vector<Dst> ZarrArray::read_all() const {
  std::vector<Dst> out(static_cast<size_t>(num_elements_));
  if (num_elements_ == 0) return out;
  const size_t dims = meta_.shape.size();
  ChunkCopy copy;
  copy.extent.resize(dims);
  copy.chunk_stride.assign(dims, 1);
  copy.array_stride.assign(dims, 1);
  std::vector<int64_t> grid(dims);
  for (size_t d = dims; d-- > 0;) {
    grid[d] = (meta_.shape[d] + meta_.chunks[d] - 1) / meta_.chunks[d];
    if (d + 1 < dims) {
      copy.chunk_stride[d] = copy.chunk_stride[d + 1] * meta_.chunks[d + 1];
      copy.array_stride[d] = copy.array_stride[d + 1] * meta_.shape[d + 1];
    }
  }
  copy.run_dim = dims - 1;
  while (copy.run_dim > 0 && meta_.chunks[copy.run_dim] == meta_.shape[copy.run_dim]) --copy.run_dim;
  std::vector<int64_t> index(dims, 0);
  while (true) {
    copy.array_offset = 0;
    for (size_t d = 0; d < dims; ++d) {
      const int64_t origin = index[d] * meta_.chunks[d];
      copy.extent[d] = std::min(meta_.chunks[d], meta_.shape[d] - origin);  // edge chunks are partial
      copy.array_offset += origin * copy.array_stride[d];
    }
    const std::vector<uint8_t> chunk = read_chunk(index);
    const std::string where = chunk_path(index);
    switch (meta_.dtype) {
      case ZarrDtype::kFloat32: copy_chunk<float>(chunk.data(), copy, out.data(), where); break;
      case ZarrDtype::kFloat64: copy_chunk<double>(chunk.data(), copy, out.data(), where); break;
      case ZarrDtype::kInt64: copy_chunk<int64_t>(chunk.data(), copy, out.data(), where); break;
      case ZarrDtype::kInt32: copy_chunk<int32_t>(chunk.data(), copy, out.data(), where); break;
      case ZarrDtype::kUint8: copy_chunk<uint8_t>(chunk.data(), copy, out.data(), where); break;
    }
    size_t d = dims;
    while (d > 0) {
      --d;
      if (++index[d] < grid[d]) break;
      index[d] = 0;
      if (d == 0) return out;
    }
  }
}

std::vector<float> ZarrArray::read_float32() const { return read_all<float>(); }
std::vector<int64_t> ZarrArray::read_int64() const { return read_all<int64_t>(); }
std::vector<uint8_t> ZarrArray::read_uint8() const { return read_all<uint8_t>(); }

}  // namespace sparsevit::episodes
