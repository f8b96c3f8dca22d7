// Gzip for the dataset readers: files read whole by util/file_bytes.h, decompressed by zlib
// when they are gzip, with errors (RuntimeError) that name the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsevit::data {

// The decompressed bytes of a gzip file, or the bytes of a plain one. A file is treated as
// gzip when it starts with the gzip magic (1f 8b); a name ending in ".gz" without the magic,
// corrupt deflate data or a truncated stream give a RuntimeError naming the file.
// Concatenated gzip members are read in order, as gunzip does.
std::vector<uint8_t> read_maybe_gzip(const std::string& path);

// Decompresses an in-memory gzip stream (`what` names it in errors).
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& compressed, const std::string& what);

bool ends_with(const std::string& s, const std::string& suffix);

}  // namespace sparsevit::data
