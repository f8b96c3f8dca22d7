#include "weights/safetensors_file.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::weights {
namespace {

constexpr uint64_t kMaxHeader = 100u << 20;

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
const DtypeName kDtypes[] = {{"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
                             {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
                             {"U8", at::kByte},    {"BOOL", at::kBool}};

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& source) {
  auto fail = [&](const std::string& why) { return RuntimeError(source + ": not a valid safetensors file: " + why); };
  if (bytes.size() < 8) throw fail("shorter than its 8-byte header length");
  const uint64_t header_len = read_le64(bytes.data());
  if (header_len > kMaxHeader) throw fail("header length " + std::to_string(header_len) + " is over 100 MB");
  if (header_len > bytes.size() - 8) throw fail("header length " + std::to_string(header_len) + " runs past the end of the file");
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) throw fail("the header is not a JSON object");
  const std::string_view data = bytes.substr(8 + header_len);

  struct Entry {
    std::string name;
    at::ScalarType type;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  SafetensorsContents out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) throw fail("__metadata__ is not an object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) throw fail("__metadata__ value of '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      throw fail("entry '" + name + "' needs dtype, shape and data_offsets");
    const auto& dtype = info["dtype"];
    if (!dtype.is_string()) throw fail("entry '" + name + "': dtype is not a string");
    Entry e{name, at::kFloat, {}, 0, 0};
    bool known = false;
    for (const auto& d : kDtypes)
      if (dtype.get<std::string>() == d.name) e.type = d.type, known = true;
    if (!known) throw fail("entry '" + name + "': unsupported dtype '" + dtype.get<std::string>() + "'");
    const auto& shape = info["shape"];
    if (!shape.is_array() || shape.size() > 64) throw fail("entry '" + name + "': shape is not a list of sizes");
    uint64_t numel = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) throw fail("entry '" + name + "': shape holds a non-size value");
      const uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t{1} << 48) || (v > 0 && numel > (uint64_t{1} << 48) / v)) throw fail("entry '" + name + "': shape too large");
      numel *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& offsets = info["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw fail("entry '" + name + "': data_offsets is not [begin, end]");
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data.size())
      throw fail("entry '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                 "] outside the " + std::to_string(data.size()) + "-byte data");
    if (e.end - e.begin != numel * at::elementSize(e.type))
      throw fail("entry '" + name + "': " + std::to_string(e.end - e.begin) + " bytes for " + std::to_string(numel) +
                 " elements of " + dtype.get<std::string>());
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end && entries[i - 1].end > entries[i - 1].begin)
      throw fail("entries '" + entries[i - 1].name + "' and '" + entries[i].name + "' overlap");
  for (const auto& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data.data() + e.begin, e.end - e.begin);  // little-endian host
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsContents read_safetensors(const std::string& path) { return parse_safetensors(read_all(path), path); }

void write_safetensors(const std::string& path, const train::NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second) throw UsageError(path + ": tensor '" + name + "' appears twice");
    const char* dtype = nullptr;
    for (const auto& d : kDtypes)
      if (d.type == tensor.scalar_type()) dtype = d.name;
    if (dtype == nullptr) throw UsageError(path + ": tensor '" + name + "' has a dtype safetensors cannot hold");
    const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t size = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + size}}};
    offset += size;
    data.push_back(t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  bytes += text;
  bytes.reserve(bytes.size() + offset);
  for (const auto& t : data) bytes.append(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel() * t.element_size()));
  write_file_atomically(path, bytes);
}

}  // namespace sparsevit::weights
