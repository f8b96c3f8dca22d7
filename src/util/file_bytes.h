// Whole-file reads: the one reader behind the dataset readers (IDX, CIFAR, images, gzip),
// the weight files (safetensors) and zarr stores. Errors are RuntimeError naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsevit {

// The bytes of `path` (regular files, and streams such as /proc files or pipes read to their
// end). RuntimeError "<path>: cannot open: <why>" or "<path>: cannot read: <why>" (a folder).
std::vector<uint8_t> read_file_bytes(const std::string& path);

// The same, for readers whose input has a known bound (zarr metadata and chunks): a file
// longer than `max_bytes` is refused ("<path>: longer than the N bytes expected") without
// reading, or holding, more than that.
std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes);

}  // namespace sparsevit
