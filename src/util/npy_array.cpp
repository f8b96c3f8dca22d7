#include "util/npy_array.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "util/errors.h"

namespace sparsevit {

namespace {

// At most 2^40 elements in all (8 TiB of int64): larger shapes are corrupt headers, and checking
// here keeps every later size computation free of overflow.
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr uint32_t kMaxHeaderBytes = 1u << 20;

struct DtypeName {
  NpyDtype dtype;
  const char* descr;
  int64_t size;
};
constexpr DtypeName kDtypes[] = {
    {NpyDtype::kInt32, "<i4", 4}, {NpyDtype::kInt64, "<i8", 8}, {NpyDtype::kBool, "|b1", 1},
    {NpyDtype::kUInt8, "|u1", 1}, {NpyDtype::kFloat32, "<f4", 4},
};

const DtypeName& entry(NpyDtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d;
  throw std::logic_error("npy: unknown dtype");
}

std::size_t skip_spaces(const std::string& s, std::size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// The position just after "'key':" (and spaces) in the header dict, or npos when the key is absent.
std::size_t value_start(const std::string& header, const std::string& key) {
  for (const char quote : {'\'', '"'}) {
    const std::size_t at = header.find(quote + key + quote);
    if (at == std::string::npos) continue;
    std::size_t i = skip_spaces(header, at + key.size() + 2);
    if (i < header.size() && header[i] == ':') return skip_spaces(header, i + 1);
  }
  return std::string::npos;
}

NpyDtype parse_descr(const std::string& header, const std::string& where) {
  std::size_t i = value_start(header, "descr");
  if (i == std::string::npos || i >= header.size() || (header[i] != '\'' && header[i] != '"'))
    throw RuntimeError(where + " has no dtype ('descr') in its .npy header");
  const std::size_t end = header.find(header[i], i + 1);
  if (end == std::string::npos) throw RuntimeError(where + " has a corrupt .npy header (unterminated 'descr')");
  const std::string descr = header.substr(i + 1, std::min<std::size_t>(end - i - 1, 32));
  for (const auto& d : kDtypes)
    if (descr == d.descr) return d.dtype;
  throw RuntimeError(where + " has dtype '" + descr + "'; supported: <i4, <i8, |b1, |u1, <f4 (little-endian)");
}

std::vector<int64_t> parse_shape(const std::string& header, const std::string& where) {
  std::size_t i = value_start(header, "shape");
  if (i == std::string::npos || i >= header.size() || header[i] != '(')
    throw RuntimeError(where + " has no shape in its .npy header");
  std::vector<int64_t> shape;
  int64_t elements = 1;
  std::string digits;
  auto finish_dim = [&] {
    if (digits.empty()) return;
    const std::size_t first = std::min(digits.find_first_not_of('0'), digits.size());
    if (digits.size() - first > 13) throw RuntimeError(where + " has an implausible dimension " + digits.substr(0, 40));
    const int64_t d = digits.size() == first ? 0 : std::stoll(digits.substr(first));
    if (d > kMaxElements || (d > 0 && elements > kMaxElements / d))
      throw RuntimeError(where + " has an implausible shape (more than 2^40 elements)");
    elements *= std::max<int64_t>(d, 1);
    if (shape.size() >= 32) throw RuntimeError(where + " has more than 32 dimensions");
    shape.push_back(d);
    digits.clear();
  };
  for (++i;; ++i) {
    if (i >= header.size()) throw RuntimeError(where + " has a corrupt .npy header (unterminated shape)");
    const char c = header[i];
    if (c == ')') break;
    if (c >= '0' && c <= '9') {
      digits.push_back(c);
    } else if (c == ',' || c == ' ' || c == 'L') {  // 'L': Python 2's long suffix
      finish_dim();
    } else {
      throw RuntimeError(where + " has a corrupt .npy header (unexpected character in its shape)");
    }
  }
  finish_dim();
  return shape;
}

uint64_t load_le(const uint8_t* p, int64_t size) {
  uint64_t v = 0;
  for (int64_t b = size - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

}  // namespace

const char* npy_descr(NpyDtype dtype) { return entry(dtype).descr; }
int64_t npy_item_size(NpyDtype dtype) { return entry(dtype).size; }

NpyHeader read_npy_header(std::istream& in, const std::string& where) {
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw RuntimeError(where + " is not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2] = {};
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4] = {};
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    throw RuntimeError(where + " has an unknown .npy version " + std::to_string(static_cast<unsigned char>(magic[6])));
  }
  if (!in || header_len > kMaxHeaderBytes) throw RuntimeError(where + " has a corrupt .npy header");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) throw RuntimeError(where + " is truncated in its header");

  NpyHeader result;
  result.dtype = parse_descr(header, where);
  const std::size_t order = value_start(header, "fortran_order");
  if (order == std::string::npos || header.compare(order, 5, "False") != 0)
    throw RuntimeError(where + " must be C-ordered (fortran_order: False)");
  result.shape = parse_shape(header, where);
  for (int64_t d : result.shape) result.count *= d;
  return result;
}

int64_t NpyArray::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t NpyArray::int_at(int64_t i) const {
  const uint8_t* p = bytes.data() + i * npy_item_size(dtype);
  switch (dtype) {
    case NpyDtype::kInt32: return static_cast<int32_t>(static_cast<uint32_t>(load_le(p, 4)));
    case NpyDtype::kInt64: return static_cast<int64_t>(load_le(p, 8));
    case NpyDtype::kBool:
    case NpyDtype::kUInt8: return *p;
    case NpyDtype::kFloat32: break;
  }
  throw std::logic_error("npy: int_at on a float32 array");
}

float NpyArray::float_at(int64_t i) const {
  if (dtype != NpyDtype::kFloat32) throw std::logic_error("npy: float_at on a non-float32 array");
  const uint32_t bits = static_cast<uint32_t>(load_le(bytes.data() + i * 4, 4));
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

NpyArray read_npy_array(const std::string& path, const std::string& context) {
  const std::string where = context + ": '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(context + ": cannot open '" + path + "'");
  const NpyHeader header = read_npy_header(in, where);
  const int64_t need = header.count * npy_item_size(header.dtype);
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff available = in.tellg() - data_start;
  if (available != static_cast<std::streamoff>(need))
    throw RuntimeError(where + " holds " + std::to_string(available) + " data bytes, its shape needs " +
                       std::to_string(need));
  in.seekg(data_start);
  NpyArray array{header.dtype, header.shape, std::vector<uint8_t>(static_cast<std::size_t>(need))};
  in.read(reinterpret_cast<char*>(array.bytes.data()), need);
  if (!in) throw RuntimeError(where + " is truncated");
  return array;
}

NpyArray parse_npy_array(const void* data, std::size_t size, const std::string& where) {
  // A view of the bytes as a stream: the header reader is shared with files.
  std::istringstream in(std::string(static_cast<const char*>(data), std::min<std::size_t>(size, 16 + kMaxHeaderBytes)));
  const NpyHeader header = read_npy_header(in, where);
  const std::size_t start = static_cast<std::size_t>(in.tellg());
  const int64_t need = header.count * npy_item_size(header.dtype);
  if (static_cast<uint64_t>(size - start) != static_cast<uint64_t>(need))
    throw RuntimeError(where + " holds " + std::to_string(size - start) + " data bytes, its shape needs " +
                       std::to_string(need));
  const auto* first = static_cast<const uint8_t*>(data) + start;
  return NpyArray{header.dtype, header.shape, std::vector<uint8_t>(first, first + need)};
}

NpyArray make_npy_array(NpyDtype dtype, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  NpyArray array{dtype, std::move(shape), {}};
  if (array.count() != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("npy: " + std::to_string(values.size()) + " values do not fill the shape");
  const int64_t size = npy_item_size(dtype);
  int64_t lo = 0, hi = 1;
  switch (dtype) {
    case NpyDtype::kInt32: lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max(); break;
    case NpyDtype::kInt64: lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max(); break;
    case NpyDtype::kUInt8: hi = 255; break;
    case NpyDtype::kBool: break;
    case NpyDtype::kFloat32: throw std::invalid_argument("npy: make_npy_array builds integer arrays");
  }
  array.bytes.reserve(values.size() * size);
  for (int64_t v : values) {
    if (v < lo || v > hi) throw std::invalid_argument("npy: value " + std::to_string(v) + " does not fit " + npy_descr(dtype));
    for (int64_t b = 0; b < size; ++b) array.bytes.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * b)));
  }
  return array;
}

std::string npy_array_bytes(const NpyArray& array) {
  std::string dims;  // Python's tuple spelling: "(2, 3)", "(5,)", "()"
  for (std::size_t i = 0; i < array.shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(array.shape[i]);
  if (array.shape.size() == 1) dims += ",";
  std::string header = std::string("{'descr': '") + npy_descr(array.dtype) + "', 'fortran_order': False, 'shape': (" +
                       dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded with spaces to 64 bytes.
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(array.bytes.data()), array.bytes.size());
  return out;
}

}  // namespace sparsevit
