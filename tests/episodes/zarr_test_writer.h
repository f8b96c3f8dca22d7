// A tiny zarr v2 directory-store writer for the tests (written from the spec, independent of the
// reader): splits a C-order array into full-size chunks, compresses each with Blosc or zlib
// directly, and writes .zarray / .zgroup JSON by hand.
#pragma once

#include <blosc.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace sparsevit::episodes::testing {

struct ZarrWriteOptions {
  std::string compressor = "blosc";  // "blosc", "zlib", "gzip" or "none"
  std::string blosc_cname = "lz4";
  int blosc_shuffle = 1;  // 0 none, 1 byte, 2 bit
  std::string separator = ".";
  std::string fill_value = "0";         // JSON text
  std::set<std::string> skip_chunks;    // chunk keys not written (read back as the fill value)
  uint8_t edge_padding = 0xAB;          // what the out-of-array part of edge chunks holds
  std::string extra_json;               // appended inside .zarray (e.g. ,"order":"F")
};

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline void write_binary(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> compress_chunk(const std::vector<uint8_t>& raw, size_t item_size,
                                           const ZarrWriteOptions& options) {
  if (options.compressor == "none") return raw;
  if (options.compressor == "blosc") {
    std::vector<uint8_t> out(raw.size() + BLOSC_MAX_OVERHEAD);
    const int n = blosc_compress_ctx(5, options.blosc_shuffle, item_size, raw.size(), raw.data(), out.data(), out.size(),
                                     options.blosc_cname.c_str(), 0, 1);
    if (n <= 0) throw std::runtime_error("blosc_compress_ctx failed for " + options.blosc_cname);
    out.resize(static_cast<size_t>(n));
    return out;
  }
  // zlib (zlib stream, as numcodecs' Zlib) or gzip (gzip stream, as numcodecs' GZip).
  z_stream stream{};
  if (deflateInit2(&stream, 6, Z_DEFLATED, options.compressor == "gzip" ? 31 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::vector<uint8_t> out(deflateBound(&stream, raw.size()) + 64);
  stream.next_in = const_cast<Bytef*>(raw.data());
  stream.avail_in = static_cast<uInt>(raw.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

inline std::string json_list(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

inline void write_zarray(const std::string& dir, const std::vector<int64_t>& shape, const std::vector<int64_t>& chunks,
                         const std::string& dtype, const ZarrWriteOptions& options) {
  std::string compressor = "null";
  if (options.compressor == "blosc")
    compressor = R"({"id": "blosc", "cname": ")" + options.blosc_cname + R"(", "clevel": 5, "shuffle": )" +
                 std::to_string(options.blosc_shuffle) + R"(, "blocksize": 0})";
  if (options.compressor == "zlib") compressor = R"({"id": "zlib", "level": 6})";
  if (options.compressor == "gzip") compressor = R"({"id": "gzip", "level": 6})";
  write_text(dir + "/.zarray", "{\n  \"chunks\": " + json_list(chunks) + ",\n  \"compressor\": " + compressor +
                                   ",\n  \"dimension_separator\": \"" + options.separator + "\",\n  \"dtype\": \"" +
                                   dtype + "\",\n  \"fill_value\": " + options.fill_value +
                                   ",\n  \"filters\": null,\n  \"order\": \"C\",\n  \"shape\": " + json_list(shape) +
                                   ",\n  \"zarr_format\": 2" + options.extra_json + "\n}\n");
}

// Writes `values` (C order, shape `shape`) as array `dir` with chunks `chunks`; T is the
// element type matching `dtype` (e.g. float for "<f4").
template <typename T>
void write_zarr_array(const std::string& dir, const std::vector<int64_t>& shape, const std::vector<int64_t>& chunks,
                      const std::string& dtype, const std::vector<T>& values, const ZarrWriteOptions& options = {}) {
  write_zarray(dir, shape, chunks, dtype, options);
  const size_t dims = shape.size();
  std::vector<int64_t> grid(dims), index(dims, 0);
  int64_t chunk_elements = 1;
  for (size_t d = 0; d < dims; ++d) {
    grid[d] = (shape[d] + chunks[d] - 1) / chunks[d];
    chunk_elements *= chunks[d];
    if (grid[d] == 0) return;
  }
  while (true) {
    std::vector<uint8_t> raw(static_cast<size_t>(chunk_elements) * sizeof(T), options.edge_padding);
    // Every element of the chunk: its position in the array, copied when inside.
    for (int64_t e = 0; e < chunk_elements; ++e) {
      int64_t rest = e, flat = 0, stride = 1;
      bool inside = true;
      std::vector<int64_t> within(dims);
      for (size_t d = dims; d-- > 0;) {
        within[d] = rest % chunks[d];
        rest /= chunks[d];
      }
      for (size_t d = dims; d-- > 0;) {
        const int64_t at = index[d] * chunks[d] + within[d];
        if (at >= shape[d]) inside = false;
        flat += at * stride;
        stride *= shape[d];
      }
      if (inside) std::memcpy(raw.data() + e * sizeof(T), &values[static_cast<size_t>(flat)], sizeof(T));
    }
    std::string key;
    for (size_t d = 0; d < dims; ++d) key += (d ? options.separator : "") + std::to_string(index[d]);
    if (!options.skip_chunks.count(key)) write_binary(dir + "/" + key, compress_chunk(raw, sizeof(T), options));
    size_t d = dims;
    while (d > 0) {
      --d;
      if (++index[d] < grid[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
  }
}

}  // namespace sparsevit::episodes::testing
