// `sparsevit policy dataset-info --data_path DEMOS [--json]`: what the policy pipeline reads from a
// .episodes file or a Diffusion Policy .zarr store: sizes, episode ends, and a CRC-32 of each array
// as read (images uint8, state and action float32, episode ends int64; little-endian, C order), so
// that a test can compare them with what zarr or numpy wrote (python/tests/test_peer_zarr.py).
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "episodes/demonstrations.h"
#include "util/errors.h"

namespace sparsevit::cli {
namespace {

struct DatasetInfoOptions {
  std::string data_path;
  bool json = false;
};

// zlib's crc32 over any size (its length argument is 32-bit); Python: zlib.crc32(array.tobytes()).
template <typename T>
uint32_t crc32_of(const std::vector<T>& values) {
  const auto* bytes = reinterpret_cast<const Bytef*>(values.data());
  size_t left = values.size() * sizeof(T);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (left > 0) {
    const auto n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, bytes, n);
    bytes += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
nlohmann::json array_info(const std::vector<int64_t>& shape, const std::vector<T>& values, const char* dtype) {
  return {{"shape", shape}, {"dtype", dtype}, {"crc32", crc32_of(values)}};
}

void run_dataset_info(const DatasetInfoOptions& o) {
  const episodes::EpisodeSet set = episodes::read_demonstrations(o.data_path);
  const int64_t steps = set.steps();
  nlohmann::json info = {{"path", o.data_path},
                         {"task", set.task},
                         {"episodes", set.episodes()},
                         {"steps", steps},
                         {"episode_ends", set.episode_ends}};
  nlohmann::json arrays = {
      {"state", array_info({steps, set.state_dim}, set.state, "float32")},
      {"action", array_info({steps, set.action_dim}, set.action, "float32")},
      {"episode_ends", array_info({set.episodes()}, set.episode_ends, "int64")},
  };
  if (!set.images.empty())
    arrays["img"] = array_info({steps, set.image_height, set.image_width, episodes::EpisodeSet::kImageChannels},
                               set.images, "uint8");
  info["arrays"] = arrays;
  if (o.json) {
    std::cout << info.dump() << std::endl;
    return;
  }
  fmt::print("{}: task {}, {} episodes, {} steps\n", o.data_path, set.task, set.episodes(), steps);
  for (const auto& [name, a] : arrays.items())
    fmt::print("  {:<12} {:<8} {:<20} crc32 {:08x}\n", name, a["dtype"].get<std::string>(), a["shape"].dump(),
               a["crc32"].get<uint32_t>());
}

}  // namespace

void add_policy_dataset_info_command(CLI::App* policy) {
  auto o = std::make_shared<DatasetInfoOptions>();
  CLI::App* cmd = policy->add_subcommand(
      "dataset-info", "Sizes, episode ends and a CRC-32 per array of demonstrations, as the policy reads them");
  cmd->add_option(option_names("data_path"), o->data_path,
                  "demonstrations (a .episodes file or Diffusion Policy's .zarr folder)")
      ->required();
  cmd->add_flag(option_names("json"), o->json, "print one JSON object instead of the table");
  cmd->callback([o] { run_dataset_info(*o); });
}

}  // namespace sparsevit::cli
