#include "episodes/episode_file.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <string>

#include "episode_test_util.h"
#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

using testing::make_set;
using testing::read_all_bytes;
using testing::TempDir;
using testing::write_all_bytes;

std::string read_error(const std::string& path) {
  try {
    read_episode_file(path);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "no error";
}

void expect_same(const EpisodeSet& a, const EpisodeSet& b) {
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.image_height, b.image_height);
  EXPECT_EQ(a.image_width, b.image_width);
  EXPECT_EQ(a.state_dim, b.state_dim);
  EXPECT_EQ(a.action_dim, b.action_dim);
  EXPECT_EQ(a.episode_ends, b.episode_ends);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.action, b.action);
  EXPECT_EQ(a.images, b.images);
}

void put_u32(std::vector<uint8_t>& bytes, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

// A file with our prefix around any header text and payload, with a correct crc32: lets a test
// reach the checks after the checksum would have caught a random edit.
std::vector<uint8_t> craft(const std::string& header, const std::vector<uint8_t>& payload, uint32_t version = 1) {
  std::vector<uint8_t> bytes(16 + header.size() + payload.size());
  std::memcpy(bytes.data(), "SVEPISOD", 8);
  put_u32(bytes, 8, version);
  put_u32(bytes, 12, static_cast<uint32_t>(header.size()));
  std::memcpy(bytes.data() + 16, header.data(), header.size());
  if (!payload.empty()) std::memcpy(bytes.data() + 16 + header.size(), payload.data(), payload.size());
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
  bytes.resize(bytes.size() + 4);
  put_u32(bytes, bytes.size() - 4, crc);
  return bytes;
}

const char* kHeaderOneStep =
    R"({"task":"t","steps":1,"episodes":1,"image_height":0,"image_width":0,"image_channels":3,"state_dim":1,"action_dim":0})";

std::vector<uint8_t> one_step_payload(int64_t end, float value) {
  std::vector<uint8_t> payload(12);
  std::memcpy(payload.data(), &end, 8);
  std::memcpy(payload.data() + 8, &value, 4);
  return payload;
}

TEST(EpisodeFile, RoundTripKeepsEverything) {
  TempDir dir;
  const EpisodeSet set = make_set({3, 1, 5});
  write_episode_file(dir.file("a.episodes"), set);
  expect_same(read_episode_file(dir.file("a.episodes")), set);
  // Header + prefix + sections + checksum, nothing else (sections 8-byte aligned).
  const auto bytes = read_all_bytes(dir.file("a.episodes"));
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + 12, 4);
  EXPECT_EQ(header_bytes % 8, 0u);
  EXPECT_EQ(bytes.size(), 16 + header_bytes + 3 * 8 + 9 * 5 * 4 + 9 * 2 * 4 + 9 * 2 * 3 * 3 + 4u);
}

TEST(EpisodeFile, RoundTripWithoutImagesOrEpisodes) {
  TempDir dir;
  const EpisodeSet no_images = make_set({2, 2}, 0, 0);
  write_episode_file(dir.file("b.episodes"), no_images);
  expect_same(read_episode_file(dir.file("b.episodes")), no_images);
  EpisodeSet empty;
  empty.state_dim = 5;
  write_episode_file(dir.file("c.episodes"), empty);
  const EpisodeSet back = read_episode_file(dir.file("c.episodes"));
  EXPECT_EQ(back.episodes(), 0);
  EXPECT_EQ(back.state_dim, 5);
}

TEST(EpisodeFile, WriteRefusesAnInconsistentSetAndKeepsTheOldFile) {
  TempDir dir;
  const EpisodeSet good = make_set({2});
  write_episode_file(dir.file("d.episodes"), good);
  EpisodeSet bad = make_set({2, 2});
  bad.state.pop_back();
  EXPECT_THROW(write_episode_file(dir.file("d.episodes"), bad), UsageError);
  expect_same(read_episode_file(dir.file("d.episodes")), good);
  EXPECT_THROW(write_episode_file(dir.file("missing/dir/e.episodes"), good), RuntimeError);
  EpisodeSet bad_task = good;
  bad_task.task = "push\xff";
  EXPECT_THROW(write_episode_file(dir.file("d.episodes"), bad_task), UsageError);
  expect_same(read_episode_file(dir.file("d.episodes")), good);
}

TEST(EpisodeFile, EveryTruncationIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("t.episodes");
  write_episode_file(path, make_set({1, 2}, 1, 2, 2, 1));  // small: every length is tried
  const auto bytes = read_all_bytes(path);
  // Every length, so every section boundary (prefix, header, each section, checksum) is covered.
  for (size_t length = 0; length < bytes.size(); ++length) {
    write_all_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length)));
    const std::string error = read_error(path);
    EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << "length " << length << ": " << error;
    if (length >= 16) {
      EXPECT_NE(error.find("truncated"), std::string::npos) << "length " << length << ": " << error;
    }
  }
  auto longer = bytes;
  longer.push_back(0);
  write_all_bytes(path, longer);
  EXPECT_NE(read_error(path).find("after the checksum"), std::string::npos) << read_error(path);
}

TEST(EpisodeFile, EveryFlippedByteIsAnErrorAndDataFlipsAreChecksumErrors) {
  TempDir dir;
  const std::string path = dir.file("f.episodes");
  write_episode_file(path, make_set({1, 2}, 1, 2, 2, 1));  // small: every byte is flipped
  const auto bytes = read_all_bytes(path);
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + 12, 4);
  for (size_t at = 0; at < bytes.size(); ++at) {
    auto flipped = bytes;
    flipped[at] ^= 0x20;
    write_all_bytes(path, flipped);
    const std::string error = read_error(path);
    EXPECT_NE(error, "no error") << "byte " << at;
    if (at >= 16 + header_bytes) {
      EXPECT_NE(error.find("checksum mismatch"), std::string::npos) << "byte " << at << ": " << error;
    }
  }
}

TEST(EpisodeFile, ForeignMissingAndOtherVersionsAreRefused) {
  TempDir dir;
  const std::string path = dir.file("x.episodes");
  EXPECT_NE(read_error(path).find("cannot open"), std::string::npos);
  EXPECT_NE(read_error(dir.path()).find("is a folder"), std::string::npos);
  write_all_bytes(path, {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_NE(read_error(path).find("bad magic"), std::string::npos) << read_error(path);
  write_all_bytes(path, craft(kHeaderOneStep, one_step_payload(1, 2.5f), /*version=*/2));
  EXPECT_NE(read_error(path).find("version 2 is not supported"), std::string::npos) << read_error(path);
  write_all_bytes(path, craft(kHeaderOneStep, one_step_payload(1, 2.5f)));
  const EpisodeSet crafted = read_episode_file(path);  // the crafted layout is the real one
  EXPECT_EQ(crafted.state, std::vector<float>{2.5f});
  EXPECT_EQ(crafted.task, "t");
}

TEST(EpisodeFile, HeaderProblemsAreNamed) {
  TempDir dir;
  const std::string path = dir.file("h.episodes");
  const auto error_for = [&](const std::string& header, const std::vector<uint8_t>& payload) {
    write_all_bytes(path, craft(header, payload));
    return read_error(path);
  };
  const auto payload = one_step_payload(1, 1.0f);
  EXPECT_NE(error_for("[1, 2]", payload).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_for("{\"task\":", payload).find("not a JSON object"), std::string::npos);
  std::string header = kHeaderOneStep;
  EXPECT_NE(error_for(header.substr(0, header.size() - 1) + ",\"extra\":1}", payload).find("unknown field \"extra\""),
            std::string::npos);
  const auto replace = [&](const std::string& from, const std::string& to) {
    std::string h = header;
    h.replace(h.find(from), from.size(), to);
    return h;
  };
  EXPECT_NE(error_for(replace("\"steps\":1", "\"steps\":-1"), payload).find("\"steps\""), std::string::npos);
  EXPECT_NE(error_for(replace("\"task\":\"t\"", "\"task\":3"), payload).find("\"task\""), std::string::npos);
  EXPECT_NE(error_for(replace("\"image_channels\":3", "\"image_channels\":4"), payload).find("image_channels"),
            std::string::npos);
  // Absurd sizes are compared with the file size before anything is allocated.
  EXPECT_NE(error_for(replace("\"steps\":1", "\"steps\":1000000000000"), payload).find("truncated"), std::string::npos);
  EXPECT_NE(error_for(replace("\"steps\":1", "\"steps\":9223372036854775807"), payload).find("overflow"),
            std::string::npos);
  const std::string huge_image =
      R"({"task":"t","steps":1,"episodes":1,"image_height":4294967296,"image_width":4294967296,"image_channels":3,)"
      R"("state_dim":1,"action_dim":0})";
  EXPECT_NE(error_for(huge_image, payload).find("overflow"), std::string::npos);
  // Consistent sizes, inconsistent contents: caught after the checksum, still named.
  EXPECT_NE(error_for(header, one_step_payload(2, 1.0f)).find("last episode ends at step 2"), std::string::npos);
  std::vector<uint8_t> repeated_end(8 * 2 + 4, 0);
  repeated_end[0] = repeated_end[8] = 1;  // episode ends {1, 1}
  EXPECT_NE(error_for(replace("\"episodes\":1", "\"episodes\":2"), repeated_end).find("does not exceed the previous end"),
            std::string::npos);
  // A header length beyond any header.
  auto bytes = craft(header, payload);
  put_u32(bytes, 12, 1u << 30);
  write_all_bytes(path, bytes);
  EXPECT_NE(read_error(path).find("header length"), std::string::npos) << read_error(path);
}

}  // namespace
}  // namespace sparsevit::episodes
