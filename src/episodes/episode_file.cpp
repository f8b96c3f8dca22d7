#include "episodes/episode_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "util/atomic_file.h"
#include "util/errors.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "episode files are little-endian and written from memory as is: a big-endian host needs byte swaps"
#endif

namespace sparsevit::episodes {
namespace {

constexpr uint64_t kPrefixBytes = 16;          // magic, version, header length
constexpr uint64_t kMaxHeaderBytes = 1 << 16;  // a handful of fields; more is not ours
constexpr uint64_t kChecksumBytes = 4;
const std::set<std::string> kHeaderFields = {"task",        "steps",     "episodes",  "image_height",
                                             "image_width", "image_channels", "state_dim", "action_dim"};

uint32_t crc_update(uint32_t crc, const void* data, uint64_t size) {
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // crc32 takes a uInt length
    const uInt n = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, bytes, n));
    bytes += n;
    size -= n;
  }
  return crc;
}

void put_u32(unsigned char* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

uint32_t get_u32(const unsigned char* in) {
  return static_cast<uint32_t>(in[0]) | static_cast<uint32_t>(in[1]) << 8 | static_cast<uint32_t>(in[2]) << 16 |
         static_cast<uint32_t>(in[3]) << 24;
}

// Sizes the header promises, in bytes, with every product checked for overflow.
struct SectionSizes {
  uint64_t episode_ends = 0, state = 0, action = 0, images = 0;
  uint64_t total() const { return episode_ends + state + action + images; }
};

[[noreturn]] void corrupt(const std::string& path, const std::string& what) { throw RuntimeError(path + ": " + what); }

uint64_t product(const std::string& path, std::initializer_list<uint64_t> factors) {
  uint64_t result = 1;
  for (uint64_t f : factors)
    if (__builtin_mul_overflow(result, f, &result)) corrupt(path, "header sizes overflow (corrupt header)");
  return result;
}

uint64_t header_count(const std::string& path, const nlohmann::json& header, const char* field) {
  if (!header.contains(field)) corrupt(path, std::string("header has no \"") + field + "\"");
  const auto& value = header[field];
  if (!value.is_number_unsigned()) corrupt(path, std::string("header field \"") + field + "\" is not a non-negative integer");
  const uint64_t n = value.get<uint64_t>();
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    corrupt(path, std::string("header field \"") + field + "\" is out of range");
  return n;
}

template <typename T>
void read_section(std::ifstream& in, const std::string& path, const char* name, std::vector<T>& out, uint64_t bytes,
                  uint32_t& crc) {
  out.resize(bytes / sizeof(T));
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(bytes)))
    corrupt(path, std::string("cannot read the ") + name + " section");
  crc = crc_update(crc, out.data(), bytes);
}

}  // namespace

void write_episode_file(const std::string& path, const EpisodeSet& set) {
  set.validate();
  nlohmann::json header = {{"task", set.task},
                           {"steps", set.steps()},
                           {"episodes", set.episodes()},
                           {"image_height", set.image_height},
                           {"image_width", set.image_width},
                           {"image_channels", EpisodeSet::kImageChannels},
                           {"state_dim", set.state_dim},
                           {"action_dim", set.action_dim}};
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {  // the only string in it: the task name
    throw UsageError(path + ": the task name is not valid UTF-8");
  }
  // Spaces (JSON whitespace) up to a multiple of 8: every section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes) throw UsageError(path + ": the task name makes the episode file header too long");

  unsigned char prefix[kPrefixBytes];
  std::memcpy(prefix, kEpisodeFileMagic, 8);
  put_u32(prefix + 8, kEpisodeFileVersion);
  put_u32(prefix + 12, static_cast<uint32_t>(text.size()));

  AtomicFile file(path);
  uint32_t crc = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  auto write = [&](const void* data, uint64_t size) {
    file.write(data, size);
    crc = crc_update(crc, data, size);
  };
  write(prefix, kPrefixBytes);
  write(text.data(), text.size());
  write(set.episode_ends.data(), set.episode_ends.size() * sizeof(int64_t));
  write(set.state.data(), set.state.size() * sizeof(float));
  write(set.action.data(), set.action.size() * sizeof(float));
  write(set.images.data(), set.images.size());
  unsigned char checksum[kChecksumBytes];
  put_u32(checksum, crc);
  file.write(checksum, kChecksumBytes);
  file.commit();
}

EpisodeSet read_episode_file(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    corrupt(path, "is a folder, not an episode file (a zarr store is read by read_zarr_replay_buffer)");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) corrupt(path, std::string("cannot open: ") + std::strerror(errno));
  const auto end = in.tellg();
  if (end < 0) corrupt(path, "cannot determine the file size");
  const uint64_t file_size = static_cast<uint64_t>(end);
  in.seekg(0);

  unsigned char prefix[kPrefixBytes] = {};
  in.read(reinterpret_cast<char*>(prefix), static_cast<std::streamsize>(std::min<uint64_t>(file_size, kPrefixBytes)));
  if (file_size < 8 || std::memcmp(prefix, kEpisodeFileMagic, 8) != 0)
    corrupt(path, "not a sparsevit episode file (bad magic)");
  if (file_size < kPrefixBytes) corrupt(path, "truncated in the file prefix (" + std::to_string(file_size) + " bytes)");
  const uint32_t version = get_u32(prefix + 8);
  if (version != kEpisodeFileVersion)
    corrupt(path, "episode file format version " + std::to_string(version) + " is not supported (this build reads " +
                      std::to_string(kEpisodeFileVersion) + ")");
  const uint64_t header_bytes = get_u32(prefix + 12);
  if (header_bytes > kMaxHeaderBytes)
    corrupt(path, "header length " + std::to_string(header_bytes) + " exceeds " + std::to_string(kMaxHeaderBytes) +
                      " bytes (corrupt)");
  if (kPrefixBytes + header_bytes + kChecksumBytes > file_size)
    corrupt(path, "truncated: " + std::to_string(file_size) + " bytes, too short for its " +
                      std::to_string(header_bytes) + "-byte header");
  std::string text(header_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  uint32_t crc = crc_update(crc_update(static_cast<uint32_t>(crc32(0L, Z_NULL, 0)), prefix, kPrefixBytes), text.data(),
                            text.size());

  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) corrupt(path, "header is not a JSON object (corrupt)");
  for (const auto& item : header.items())
    if (!kHeaderFields.count(item.key())) corrupt(path, "header has unknown field \"" + item.key() + "\"");
  if (!header.contains("task") || !header["task"].is_string()) corrupt(path, "header field \"task\" is not a string");
  const uint64_t steps = header_count(path, header, "steps");
  const uint64_t episodes = header_count(path, header, "episodes");
  const uint64_t height = header_count(path, header, "image_height");
  const uint64_t width = header_count(path, header, "image_width");
  const uint64_t channels = header_count(path, header, "image_channels");
  const uint64_t state_dim = header_count(path, header, "state_dim");
  const uint64_t action_dim = header_count(path, header, "action_dim");
  if (channels != static_cast<uint64_t>(EpisodeSet::kImageChannels))
    corrupt(path, "header field \"image_channels\" is " + std::to_string(channels) + ", expected 3 (RGB)");

  // Everything the header promises must be in the file before anything is allocated.
  SectionSizes sizes;
  sizes.episode_ends = product(path, {episodes, sizeof(int64_t)});
  sizes.state = product(path, {steps, state_dim, sizeof(float)});
  sizes.action = product(path, {steps, action_dim, sizeof(float)});
  sizes.images = product(path, {steps, height, width, channels});
  uint64_t expected = kPrefixBytes + header_bytes + kChecksumBytes;
  for (uint64_t part : {sizes.episode_ends, sizes.state, sizes.action, sizes.images})
    if (__builtin_add_overflow(expected, part, &expected)) corrupt(path, "header sizes overflow (corrupt header)");
  if (file_size < expected)
    corrupt(path, "truncated: " + std::to_string(file_size) + " bytes, the header promises " + std::to_string(expected));
  if (file_size > expected)
    corrupt(path, "has " + std::to_string(file_size - expected) + " bytes after the checksum (corrupt or not ours)");

  EpisodeSet set;
  set.task = header["task"].get<std::string>();
  set.image_height = static_cast<int64_t>(height);
  set.image_width = static_cast<int64_t>(width);
  set.state_dim = static_cast<int64_t>(state_dim);
  set.action_dim = static_cast<int64_t>(action_dim);
  read_section(in, path, "episode_ends", set.episode_ends, sizes.episode_ends, crc);
  read_section(in, path, "state", set.state, sizes.state, crc);
  read_section(in, path, "action", set.action, sizes.action, crc);
  read_section(in, path, "images", set.images, sizes.images, crc);
  unsigned char checksum[kChecksumBytes];
  if (!in.read(reinterpret_cast<char*>(checksum), kChecksumBytes)) corrupt(path, "cannot read the checksum");
  if (get_u32(checksum) != crc) corrupt(path, "checksum mismatch (the file is corrupt)");

  if (!set.episode_ends.empty() && set.episode_ends.back() != static_cast<int64_t>(steps))
    corrupt(path, "the last episode ends at step " + std::to_string(set.episode_ends.back()) + " but the header says " +
                      std::to_string(steps) + " steps");
  try {
    set.validate();
  } catch (const UsageError& e) {
    corrupt(path, e.what());
  }
  return set;
}

}  // namespace sparsevit::episodes
