// NumPy .npy files of float32 (the format calibration writes and `mask: pruning` reads), so
// score maps move between sparsevit and Python (`np.load`) without conversion.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace sparsevit {

// Reads the header of a little-endian, C-ordered float32 ('<f4') .npy file, leaving `in` at
// the first value, and returns the shape. Errors are RuntimeError naming `path`, prefixed by
// `context` (e.g. "pruning").
std::vector<int64_t> read_npy_float32_header(std::istream& in, const std::string& path, const std::string& context);

// A whole float32 .npy file: its shape and values (C order).
struct NpyFloat32 {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
// Reads a float32 .npy file (header as above); a short or over-long data part is a RuntimeError.
NpyFloat32 read_npy_float32(const std::string& path, const std::string& context);

// Writes `values` (C order, shape `shape`) as a version 1.0 '<f4' .npy file, atomically
// (temp file + rename): an interrupted write never leaves a half-written file at `path`.
void write_npy_float32(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values);

}  // namespace sparsevit
