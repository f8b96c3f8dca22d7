// Typed NumPy .npy arrays: the header and data of a C-ordered, little-endian array of one of the
// dtypes patterns and scores use (int32, int64, bool, uint8, float32), read from a file or from
// bytes (an .npz member), and written back. Other dtypes, big-endian data and Fortran order are
// refused with a RuntimeError naming the input, never read wrongly.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace sparsevit {

enum class NpyDtype { kInt32, kInt64, kBool, kUInt8, kFloat32 };

const char* npy_descr(NpyDtype dtype);  // NumPy's spelling: "<i4", "<i8", "|b1", "|u1", "<f4"
int64_t npy_item_size(NpyDtype dtype);  // bytes per element

struct NpyHeader {
  NpyDtype dtype = NpyDtype::kFloat32;
  std::vector<int64_t> shape;
  int64_t count = 1;  // elements: the product of shape (at most 2^40)
};

// Reads the preamble and header dict, leaving `in` at the first data byte. `where` names the
// input in errors, e.g. "file: 'p.npz' member 'row_ptr'".
NpyHeader read_npy_header(std::istream& in, const std::string& where);

struct NpyArray {
  NpyDtype dtype = NpyDtype::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // count() * item size bytes, little-endian, C order

  int64_t count() const;
  bool is_integer() const { return dtype == NpyDtype::kInt32 || dtype == NpyDtype::kInt64; }
  // Element i as an integer (int and bool/uint8 dtypes; a float32 array is a logic_error).
  int64_t int_at(int64_t i) const;
  float float_at(int64_t i) const;  // float32 arrays only
};

// A whole .npy file; its data part must be exactly what the shape needs.
NpyArray read_npy_array(const std::string& path, const std::string& context);
// The same from bytes in memory (an archive member); `where` names it in errors.
NpyArray parse_npy_array(const void* data, std::size_t size, const std::string& where);

// Builders for writers and tests: values are range-checked against the dtype.
NpyArray make_npy_array(NpyDtype dtype, std::vector<int64_t> shape, const std::vector<int64_t>& values);
// The version 1.0 .npy encoding of `array` (what np.save writes).
std::string npy_array_bytes(const NpyArray& array);

}  // namespace sparsevit
