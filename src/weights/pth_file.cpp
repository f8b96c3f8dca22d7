#include "weights/pth_file.h"

#include <cstring>
#include <memory>
#include <set>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/file_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "weights/printable.h"
#include "weights/restricted_unpickler.h"
#include "weights/zip_records.h"

namespace sparsevit::weights {
namespace {

// LibTorch's MemoryReadAdapter copies without a bounds check; this one clamps (and copies nothing
// for n == 0, when miniz may pass a null buffer: found by fuzzing).
class BoundedMemoryAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedMemoryAdapter(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (n == 0 || pos >= bytes_.size()) return 0;
    n = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::string_view bytes_;
};

std::string first_line(const char* what) {
  std::string text(what);
  const size_t newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

c10::IValue parse_archive(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in, const std::string& source) {
  // Zip files start with "PK"; torch.save before 1.6 wrote a bare pickle (PROTO 0x80, then a magic number).
  unsigned char magic[2] = {0, 0};
  if (in->size() >= 2) in->read(0, magic, 2, "magic");
  if (magic[0] == 0x80)
    throw RuntimeError(source + ": legacy torch.save format; re-save it with torch >= 1.6");
  if (!(magic[0] == 'P' && magic[1] == 'K'))
    throw RuntimeError(source + ": not a torch.save file (no zip signature)");
  try {
    check_zip_record_sizes(*in, source);
    caffe2::serialize::PyTorchStreamReader reader(in);
    if (!reader.hasRecord("data.pkl"))
      throw RuntimeError(source + ": zip archive without data.pkl (not a torch.save file)");
    if (reader.hasRecord("byteorder")) {
      const auto [data, size] = reader.getRecord("byteorder");
      if (std::string(static_cast<const char*>(data.get()), size) != "little")
        throw RuntimeError(source + ": big-endian torch.save files are not supported");
    }
    const auto [pickle, pickle_size] = reader.getRecord("data.pkl");
    const StorageRecordLoader load = [&](const std::string& key) -> std::pair<at::DataPtr, size_t> {
      const std::string name = "data/" + key;
      if (!reader.hasRecord(name)) throw RuntimeError(source + ": storage record '" + printable(name) + "' is missing");
      auto [data, size] = reader.getRecord(name);
      return {std::move(data), size};
    };
    return restricted_unpickle(std::string_view(static_cast<const char*>(pickle.get()), pickle_size), load, source);
  } catch (const RuntimeError&) {
    throw;
  } catch (const c10::Error& e) {
    throw RuntimeError(source + ": damaged torch.save archive: " + first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {  // e.g. std::stoull on a garbage version record
    throw RuntimeError(source + ": damaged torch.save archive: " + first_line(e.what()));
  }
}

bool is_tensor_dict(const c10::IValue& v) {
  if (!v.isGenericDict()) return false;
  for (const auto& entry : v.toGenericDict())
    if (!entry.key().isString() || !entry.value().isTensor()) return false;
  return true;
}

std::string top_level_keys(const c10::IValue& root) {
  std::string keys;
  for (const auto& entry : root.toGenericDict()) {
    if (!keys.empty()) keys += ", ";
    keys += entry.key().isString() ? "'" + printable(entry.key().toStringRef()) + "'" : std::to_string(entry.key().toInt());
    if (keys.size() > 200) return keys + ", ...";
  }
  return keys.empty() ? "none" : keys;
}

// What Python's torch.save writes for a dict of tensors: `data.pkl`, one `data/<key>` record per
// storage (keyed by the pickle's persistent ids), then the version records. Not
// torch::jit::pickle_save: its Pickler tags typed dicts with torch.jit._pickle.restore_type_tag, a
// global torch.load(weights_only=True) refuses (torch 2.6's default, and timm's load_checkpoint).
std::string torch_save_archive(const c10::IValue& root) {
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickle.append(data, size); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(root);
  pickler.stop();

  std::string archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    archive.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  // Without get_tensor_id the Pickler names storage k (in the order it met them) "k".
  const std::vector<at::Tensor>& storages = pickler.tensorData();
  for (size_t k = 0; k < storages.size(); ++k) {
    const torch::jit::WriteableTensorData bytes = torch::jit::getWriteableTensorData(storages[k]);
    writer.writeRecord("data/" + std::to_string(k), bytes.data(), bytes.sizeInBytes());
  }
  writer.writeEndOfFile();
  return archive;
}

}  // namespace

c10::IValue parse_pth(std::string_view bytes, const std::string& source) {
  return parse_archive(std::make_shared<BoundedMemoryAdapter>(bytes), source);
}

c10::IValue read_pth(const std::string& path) {
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> file;
  try {
    file = std::make_shared<caffe2::serialize::FileAdapter>(path);
  } catch (const std::exception& e) {
    throw RuntimeError(path + ": cannot open: " + first_line(e.what()));
  }
  return parse_archive(file, path);
}

weights::NamedTensors state_dict_from_pth(const c10::IValue& root, const std::string& path) {
  if (!root.isGenericDict())
    throw RuntimeError(path + ": holds a " + root.tagKind() + ", not a dict of tensors");
  c10::IValue chosen;
  std::string chosen_key;
  if (is_tensor_dict(root)) {
    chosen = root;
  } else {
    // MAE and DeiT keep the weights under "model", timm training scripts under "state_dict",
    // TimeSformer (SlowFast's checkpoints) under "model_state"...
    const auto dict = root.toGenericDict();
    for (const char* key : {"model", "state_dict", "model_state", "model_ema", "state_dict_ema", "module", "net"}) {
      const auto found = dict.find(c10::IValue(std::string(key)));
      if (found != dict.end() && found->value().isGenericDict()) {
        chosen = found->value();
        chosen_key = key;
        break;
      }
    }
  }
  if (!chosen.isGenericDict())
    throw RuntimeError(path + ": no state dict found: the top level is not a dict of tensors and has none of the "
                       "keys 'model', 'state_dict', 'model_ema', 'state_dict_ema', 'module', 'net' (its keys: " +
                       top_level_keys(root) + ")");
  const std::string where = chosen_key.empty() ? path + ": " : path + ": under '" + chosen_key + "': ";
  weights::NamedTensors tensors;
  for (const auto& entry : chosen.toGenericDict()) {
    if (!entry.key().isString()) throw RuntimeError(where + "a key is not a string");
    if (!entry.value().isTensor())
      throw RuntimeError(where + "'" + printable(entry.key().toStringRef()) + "' is a " + entry.value().tagKind() + ", not a tensor");
    tensors.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return tensors;
}

void write_pth(const std::string& path, const weights::NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw UsageError(path + ": tensor '" + printable(name) + "' is undefined");
    if (dict.contains(name)) throw UsageError(path + ": tensor '" + printable(name) + "' appears twice");
    dict.insert(name, tensor.detach().to(at::kCPU).contiguous());
  }
  write_file_atomically(path, torch_save_archive(c10::IValue(dict)));
}

}  // namespace sparsevit::weights
