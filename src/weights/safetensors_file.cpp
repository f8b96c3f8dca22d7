#include "weights/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_bytes.h"
#include "weights/printable.h"

namespace sparsevit::weights {
namespace {

constexpr size_t kMaxDims = 64;
constexpr int kMaxJsonDepth = 64;  // a valid header nests 3 deep; bounds the JSON parser's recursion

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},   {"U8", at::kByte},        {"BOOL", at::kBool},
};

const char* dtype_name(at::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  return nullptr;
}

// Entry as declared in the header, checked against the buffer before any copy.
struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// Depth of [ and { outside strings: the check runs before the JSON parser sees the text.
int json_nesting_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

Entry parse_entry(const std::string& name, const nlohmann::json& value, const std::string& source) {
  const std::string where = source + ": tensor '" + printable(name) + "'";
  if (!value.is_object()) throw RuntimeError(where + ": entry is not a JSON object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!value.contains(field)) throw RuntimeError(where + ": entry has no \"" + field + "\"");
  Entry entry;
  entry.name = name;
  const auto& dtype = value["dtype"];
  if (!dtype.is_string()) throw RuntimeError(where + ": \"dtype\" is not a string");
  const std::string dtype_text = dtype.get<std::string>();
  const auto* found = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                   [&](const DtypeName& d) { return dtype_text == d.name; });
  if (found == std::end(kDtypes))
    throw RuntimeError(where + ": unsupported dtype '" + printable(dtype_text) +
                       "' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  entry.type = found->type;

  const auto& shape = value["shape"];
  if (!shape.is_array()) throw RuntimeError(where + ": \"shape\" is not an array");
  if (shape.size() > kMaxDims) throw RuntimeError(where + ": more than 64 dimensions");
  // The product of the non-zero dimensions must fit too: LibTorch multiplies them all, zeros or not.
  uint64_t product = 1;
  bool has_zero = false;
  for (const auto& dim : shape) {
    if (!dim.is_number_integer()) throw RuntimeError(where + ": \"shape\" holds a non-integer");
    if (!dim.is_number_unsigned()) throw RuntimeError(where + ": \"shape\" holds a negative dimension");
    const uint64_t d = dim.get<uint64_t>();
    entry.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(d, INT64_MAX)));
    if (d == 0) has_zero = true;
    else if (product > static_cast<uint64_t>(INT64_MAX) / d)
      throw RuntimeError(where + ": the shape's element count overflows");
    else product *= d;
  }
  const uint64_t numel = has_zero ? 0 : product;
  const uint64_t itemsize = c10::elementSize(entry.type);
  if (product > static_cast<uint64_t>(INT64_MAX) / itemsize) throw RuntimeError(where + ": the shape's element count overflows");

  const auto& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw RuntimeError(where + ": \"data_offsets\" is not [begin, end] of non-negative integers");
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.begin > entry.end)
    throw RuntimeError(where + ": data_offsets [" + std::to_string(entry.begin) + ", " +
                       std::to_string(entry.end) + "] end before begin");
  if (entry.end - entry.begin != numel * itemsize)
    throw RuntimeError(where + ": data_offsets span " + std::to_string(entry.end - entry.begin) +
                       " bytes, shape and dtype need " + std::to_string(numel * itemsize));
  return entry;
}

}  // namespace

SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8)
    throw RuntimeError(source + ": not a safetensors file: " + std::to_string(bytes.size()) +
                       " bytes, shorter than the 8-byte header length");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_size > kMaxSafetensorsHeaderBytes)
    throw RuntimeError(source + ": header length " + std::to_string(header_size) + " exceeds the 100 MB limit");
  if (header_size > bytes.size() - 8)
    throw RuntimeError(source + ": header length " + std::to_string(header_size) + " runs past the end of the " +
                       std::to_string(bytes.size()) + "-byte file (truncated?)");
  const std::string_view header = bytes.substr(8, header_size);
  const std::string_view buffer = bytes.substr(8 + header_size);

  if (json_nesting_depth(header) > kMaxJsonDepth) throw RuntimeError(source + ": header JSON nests too deep");
  // Duplicate top-level names are an error; nlohmann would silently keep the last.
  std::set<std::string> seen;
  std::string duplicate;
  const auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(header.begin(), header.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(source + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!duplicate.empty()) throw RuntimeError(source + ": tensor '" + printable(duplicate) + "' appears twice in the header");
  if (!root.is_object()) throw RuntimeError(source + ": header is not a JSON object");

  SafetensorsContents contents;
  std::vector<Entry> entries;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw RuntimeError(source + ": \"__metadata__\" is not a JSON object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string())
          throw RuntimeError(source + ": \"__metadata__\" value of '" + printable(key) + "' is not a string");
        contents.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, value, source));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.end > buffer.size())
      throw RuntimeError(source + ": tensor '" + printable(e.name) + "' data_offsets [" + std::to_string(e.begin) + ", " +
                         std::to_string(e.end) + "] run past the " + std::to_string(buffer.size()) +
                         "-byte data buffer (truncated?)");
    if (i > 0 && e.begin < entries[i - 1].end)
      throw RuntimeError(source + ": tensors '" + printable(entries[i - 1].name) + "' and '" + printable(e.name) + "' overlap in the data buffer");
  }
  contents.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    at::Tensor tensor = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    const char* data = buffer.data() + e.begin;
    const size_t nbytes = e.end - e.begin;
    if (e.type == at::kBool) {
      // A bool byte other than 0/1 is undefined behaviour for every later operation on it.
      for (size_t i = 0; i < nbytes; ++i)
        if (static_cast<unsigned char>(data[i]) > 1)
          throw RuntimeError(source + ": BOOL tensor '" + printable(e.name) + "' holds a byte other than 0 or 1");
    }
    if (nbytes > 0) std::memcpy(tensor.data_ptr(), data, nbytes);
    contents.tensors.emplace_back(e.name, std::move(tensor));
  }
  return contents;
}

SafetensorsContents read_safetensors(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return parse_safetensors(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

void write_safetensors(const std::string& path, const weights::NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string where = path + ": tensor '" + printable(name) + "'";
    if (name.empty()) throw UsageError(path + ": a tensor has an empty name");
    if (name == "__metadata__") throw UsageError(where + ": the name is reserved for metadata");
    if (!names.insert(name).second) throw UsageError(where + " appears twice");
    if (!tensor.defined()) throw UsageError(where + " is undefined");
    if (!tensor.device().is_cpu()) throw UsageError(where + " is on " + tensor.device().str() + "; move it to the CPU first");
    if (tensor.layout() != at::kStrided) throw UsageError(where + " is not a dense tensor");
    const char* dtype = dtype_name(tensor.scalar_type());
    if (dtype == nullptr)
      throw UsageError(where + " has dtype " + std::string(c10::toString(tensor.scalar_type())) +
                       ", which safetensors files here do not hold");
    const uint64_t nbytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    header[name] = {{"dtype", dtype}, {"shape", tensor.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((static_cast<uint64_t>(header_text.size()) >> (8 * i)) & 0xff);

  AtomicFile file(path);
  file.write(length, 8);
  file.write(header_text);
  for (const auto& entry : tensors) {
    const at::Tensor data = entry.second.contiguous();
    if (data.numel() > 0) file.write(data.data_ptr(), static_cast<size_t>(data.numel()) * data.element_size());
  }
  file.commit();
}

}  // namespace sparsevit::weights
