#include "weights/pth_file.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/serialize.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "weights/restricted_unpickler.h"

namespace sparsevit::weights {
namespace {

class MemoryReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MemoryReader(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* = "") const override {
    if (pos >= bytes_.size()) return 0;
    const size_t count = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, count);
    return count;
  }

 private:
  std::string_view bytes_;
};

std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

}  // namespace

c10::IValue parse_pth(std::string_view bytes, const std::string& source) {
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x80)
    throw RuntimeError(source + ": legacy torch.save format (before PyTorch 1.6); re-save it with torch.save in PyTorch >= 1.6");
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "PK\x03\x04", 4) != 0)
    throw RuntimeError(source + ": not a torch.save file (no zip signature)");
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<MemoryReader>(bytes));
    if (!reader.hasRecord("data.pkl")) throw RuntimeError(source + ": the archive has no data.pkl (not a torch.save file)");
    const auto [pickle, pickle_size] = reader.getRecord("data.pkl");
    const StorageLoader storages = [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
      const std::string record = "data/" + key;
      if (key.empty() || key.find('/') != std::string::npos || !reader.hasRecord(record))
        throw RuntimeError(source + ": storage '" + key + "' is missing from the archive");
      const uint64_t expected = static_cast<uint64_t>(numel) * at::elementSize(dtype);
      if (expected > bytes.size()) throw RuntimeError(source + ": storage '" + key + "' is larger than the file");
      auto [data, size] = reader.getRecord(record);
      if (size != expected)
        throw RuntimeError(source + ": storage '" + key + "' holds " + std::to_string(size) + " bytes, its tensors need " +
                           std::to_string(expected));
      at::Tensor storage = at::empty({numel}, at::TensorOptions().dtype(dtype));
      if (size > 0) std::memcpy(storage.data_ptr(), data.get(), size);
      return storage;
    };
    return restricted_unpickle(std::string_view(static_cast<const char*>(pickle.get()), pickle_size), storages, source);
  } catch (const c10::Error& e) {
    throw RuntimeError(source + ": not a readable torch.save archive: " + first_line(e.what_without_backtrace()));
  }
}

c10::IValue read_pth(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  return parse_pth(bytes, path);
}

train::NamedTensors state_dict_from_pth(const c10::IValue& root, const std::string& source) {
  auto tensor_dict = [](const c10::IValue& v) {
    if (!v.isGenericDict()) return false;
    bool any_tensor = false;
    for (const auto& kv : v.toGenericDict()) {
      if (!kv.key().isString()) return false;
      any_tensor |= kv.value().isTensor();
    }
    return any_tensor;
  };
  c10::IValue chosen;
  if (tensor_dict(root)) {
    chosen = root;
  } else if (root.isGenericDict()) {
    const auto dict = root.toGenericDict();
    for (const char* key : {"model", "state_dict", "model_ema", "module"}) {
      const auto it = dict.find(c10::IValue(std::string(key)));
      if (it != dict.end() && tensor_dict(it->value())) {
        chosen = it->value();
        break;
      }
    }
    if (chosen.isNone()) {
      std::string keys;
      for (const auto& kv : dict) keys += (keys.empty() ? "" : ", ") + (kv.key().isString() ? kv.key().toStringRef() : "?");
      throw RuntimeError(source + ": no state dict of tensors at the top level or under model / state_dict / model_ema "
                                  "(top-level keys: " + keys + ")");
    }
  } else {
    throw RuntimeError(source + ": holds a " + root.tagKind() + ", not a dict of tensors");
  }
  train::NamedTensors out;
  for (const auto& kv : chosen.toGenericDict()) {
    if (!kv.value().isTensor())
      throw RuntimeError(source + ": '" + kv.key().toStringRef() + "' is a " + kv.value().tagKind() + ", not a tensor");
    out.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
  }
  return out;
}

void write_pth(const std::string& path, const train::NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) {
    if (dict.contains(name)) throw UsageError(path + ": tensor '" + name + "' appears twice");
    dict.insert(name, t.detach().to(at::kCPU).contiguous());
  }
  const std::vector<char> bytes = torch::pickle_save(dict);
  write_file_atomically(path, std::string_view(bytes.data(), bytes.size()));
}

}  // namespace sparsevit::weights
