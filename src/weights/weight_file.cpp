#include "weights/weight_file.h"

#include <cstring>
#include <fstream>

#include "train/checkpoint.h"
#include "util/errors.h"
#include "weights/pth_file.h"
#include "weights/safetensors_file.h"

namespace sparsevit::weights {

WeightFormat detect_weight_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(path + ": cannot open");
  char head[9] = {};
  in.read(head, 9);
  const std::streamsize got = in.gcount();
  if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return WeightFormat::pth;
  if (got >= 8 && std::memcmp(head, "SVCKPT01", 8) == 0) return WeightFormat::checkpoint;
  if (got == 9 && head[8] == '{') return WeightFormat::safetensors;
  if (got >= 1 && static_cast<uint8_t>(head[0]) == 0x80) return WeightFormat::pth;  // legacy torch.save: clear error later
  throw RuntimeError(path + ": not a weight file sparsevit reads (safetensors, torch.save .pth or a sparsevit checkpoint)");
}

WeightFormat parse_weight_format_name(const std::string& name) {
  if (name == "safetensors") return WeightFormat::safetensors;
  if (name == "pth") return WeightFormat::pth;
  throw UsageError("unknown weight format '" + name + "' (safetensors or pth)");
}

train::NamedTensors read_weight_file(const std::string& path) {
  switch (detect_weight_format(path)) {
    case WeightFormat::pth:
      return state_dict_from_pth(read_pth(path), path);
    case WeightFormat::checkpoint:
      return train::LoadedCheckpoint(path).model_tensors();
    case WeightFormat::safetensors:
      return read_safetensors(path).tensors;
  }
  return {};
}

void write_weight_file(const std::string& path, const train::NamedTensors& tensors, WeightFormat format) {
  if (format == WeightFormat::safetensors) {
    write_safetensors(path, tensors, {{"format", "pt"}});
  } else if (format == WeightFormat::pth) {
    write_pth(path, tensors);
  } else {
    throw UsageError("export writes safetensors or pth");
  }
}

}  // namespace sparsevit::weights
