#include "util/npy_file.h"

#include "util/atomic_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "util/errors.h"

namespace sparsevit {

std::vector<int64_t> read_npy_float32_header(std::istream& in, const std::string& path, const std::string& context) {
  const std::string where = context + ": '" + path + "'";
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw RuntimeError(where + " is not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  }
  if (!in || header_len > (1u << 20)) throw RuntimeError(where + " has a corrupt .npy header");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) throw RuntimeError(where + " is truncated in its header");
  if (header.find("'descr': '<f4'") == std::string::npos)
    throw RuntimeError(where + " must hold little-endian float32 ('<f4')");
  if (header.find("'fortran_order': False") == std::string::npos) throw RuntimeError(where + " must be C-ordered");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([0-9,\\s]*)\\)")))
    throw RuntimeError(where + " has no shape in its header");
  std::vector<int64_t> shape;
  const std::string dims = m[1];
  const std::regex number("[0-9]+");
  // At most 2^40 elements in all (4 TiB of float32): larger shapes are corrupt headers, and
  // checking here keeps every later size computation free of overflow.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t elements = 1;
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    const std::string digits = it->str();
    const std::size_t first = std::min(digits.find_first_not_of('0'), digits.size());
    if (digits.size() - first > 13) throw RuntimeError(where + " has an implausible dimension " + digits);
    const int64_t d = digits.size() == first ? 0 : std::stoll(digits.substr(first));
    if (d > kMaxElements || (d > 0 && elements > kMaxElements / d))
      throw RuntimeError(where + " has an implausible shape (more than 2^40 elements)");
    elements *= std::max<int64_t>(d, 1);
    shape.push_back(d);
  }
  return shape;
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
