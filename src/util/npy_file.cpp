#include "util/npy_file.h"

#include "util/atomic_file.h"
#include "util/npy_array.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/errors.h"

namespace sparsevit {

std::vector<int64_t> read_npy_float32_header(std::istream& in, const std::string& path, const std::string& context) {
  const std::string where = context + ": '" + path + "'";
  NpyHeader header = read_npy_header(in, where);  // the one .npy header parser (util/npy_array)
  if (header.dtype != NpyDtype::kFloat32)
    throw RuntimeError(where + " must hold little-endian float32 ('<f4'), not '" + npy_descr(header.dtype) + "'");
  return std::move(header.shape);
}

NpyFloat32 read_npy_float32(const std::string& path, const std::string& context) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(context + ": cannot open '" + path + "'");
  NpyFloat32 array;
  array.shape = read_npy_float32_header(in, path, context);
  int64_t count = 1;
  for (int64_t d : array.shape) count *= d;
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff available = in.tellg() - data_start;
  if (available != static_cast<std::streamoff>(count) * 4)
    throw RuntimeError(context + ": '" + path + "' holds " + std::to_string(available) + " data bytes, its shape needs " +
                       std::to_string(count * 4));
  in.seekg(data_start);
  array.values.resize(static_cast<std::size_t>(count));
  in.read(reinterpret_cast<char*>(array.values.data()), count * 4);
  if (!in) throw RuntimeError(context + ": '" + path + "' is truncated");
  return array;
}

void write_npy_float32(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  int64_t count = 1;
  std::string dims;  // Python's tuple spelling: "(2, 3)", "(5,)", "()"
  for (std::size_t i = 0; i < shape.size(); ++i) {
    count *= shape[i];
    dims += (i ? ", " : "") + std::to_string(shape[i]);
  }
  if (shape.size() == 1) dims += ",";
  if (count != static_cast<int64_t>(values.size()))
    throw RuntimeError("npy: " + std::to_string(values.size()) + " values do not fill the shape of '" + path + "'");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded with spaces to 64 bytes.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');

  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char preamble[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(len & 0xff),
                             static_cast<char>(len >> 8)};
  AtomicFile out(path);
  out.write(preamble, 10);
  out.write(header);
  out.write(values.data(), values.size() * 4);
  out.commit();
}

}  // namespace sparsevit
