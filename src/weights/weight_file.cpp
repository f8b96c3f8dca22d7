#include "weights/weight_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/errors.h"
#include "weights/checkpoint_file.h"
#include "weights/pth_file.h"
#include "weights/safetensors_file.h"

namespace sparsevit::weights {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::safetensors: return "safetensors";
    case WeightFormat::pth: return "pth";
    case WeightFormat::checkpoint: return "checkpoint";
  }
  return "?";
}

WeightFormat detect_weight_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  unsigned char head[9] = {};
  in.read(reinterpret_cast<char*>(head), 9);
  const std::streamsize got = in.gcount();
  if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return WeightFormat::pth;
  if (got >= 8 && std::memcmp(head, "SVCKPT01", 8) == 0) return WeightFormat::checkpoint;
  if (got == 9) {
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | head[i];
    if (head[8] == '{' && header >= 2 && header <= static_cast<uint64_t>(size) - 8) return WeightFormat::safetensors;
  }
  if (got >= 1 && head[0] == 0x80)
    throw RuntimeError(path + ": legacy torch.save format; re-save it with torch >= 1.6");
  throw RuntimeError(path + ": not a weight file: neither safetensors, a torch.save zip (.pth) nor a sparsevit checkpoint");
}

weights::NamedTensors read_weight_file(const std::string& path) {
  switch (detect_weight_format(path)) {
    case WeightFormat::safetensors: return read_safetensors(path).tensors;
    case WeightFormat::pth: return state_dict_from_pth(read_pth(path), path);
    case WeightFormat::checkpoint: return CheckpointFile(path).model_tensors();
  }
  throw RuntimeError(path + ": unknown weight format");
}

WeightFormat parse_weight_format_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "safetensors") return WeightFormat::safetensors;
  if (lower == "pth") return WeightFormat::pth;
  throw UsageError("unknown weight format '" + name + "' (expected safetensors or pth)");
}

void write_weight_file(const std::string& path, const weights::NamedTensors& tensors, WeightFormat format,
                       const std::map<std::string, std::string>& metadata) {
  switch (format) {
    case WeightFormat::safetensors: write_safetensors(path, tensors, metadata); return;
    case WeightFormat::pth: write_pth(path, tensors); return;
    case WeightFormat::checkpoint:
      throw UsageError(path + ": checkpoints are written by training (train::save_checkpoint), not from bare tensors");
  }
}

}  // namespace sparsevit::weights
