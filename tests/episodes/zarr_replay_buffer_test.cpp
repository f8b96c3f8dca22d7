#include "episodes/zarr_replay_buffer.h"

#include <gtest/gtest.h>

#include <numeric>

#include "episode_test_util.h"
#include "episodes/zarr_array.h"
#include "util/errors.h"
#include "zarr_test_writer.h"

namespace sparsevit::episodes {
namespace {

using testing::make_set;
using testing::TempDir;
using testing::write_text;
using testing::write_zarr_array;
using testing::ZarrWriteOptions;

// `set` as Diffusion Policy saves a ReplayBuffer: float32 images 0–255, int64 episode ends.
void write_replay_buffer(const std::string& root, const EpisodeSet& set, bool uint8_images = false) {
  write_text(root + "/.zgroup", "{\"zarr_format\": 2}");
  write_text(root + "/data/.zgroup", "{\"zarr_format\": 2}");
  write_text(root + "/meta/.zgroup", "{\"zarr_format\": 2}");
  const int64_t T = set.steps();
  ZarrWriteOptions zlib;
  zlib.compressor = "zlib";
  write_zarr_array(root + "/data/state", {T, set.state_dim}, {4, set.state_dim}, "<f4", set.state, zlib);
  write_zarr_array(root + "/data/action", {T, set.action_dim}, {3, 1}, "<f4", set.action);
  write_zarr_array(root + "/meta/episode_ends", {set.episodes()}, {2}, "<i8", set.episode_ends);
  const std::vector<int64_t> img_shape = {T, set.image_height, set.image_width, 3};
  const std::vector<int64_t> img_chunks = {3, set.image_height, set.image_width, 3};
  if (uint8_images) {
    write_zarr_array(root + "/data/img", img_shape, img_chunks, "|u1", set.images);
  } else {
    const std::vector<float> img(set.images.begin(), set.images.end());
    write_zarr_array(root + "/data/img", img_shape, img_chunks, "<f4", img);
  }
  // Keys DP stores that we do not read.
  write_zarr_array(root + "/data/n_contacts", {T, 1}, {T, 1}, "<f4", std::vector<float>(static_cast<size_t>(T), 0.0f));
}

std::string read_error(const std::string& root) {
  try {
    read_zarr_replay_buffer(root);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ZarrReplayBuffer, ReadsWhatDiffusionPolicyWrites) {
  TempDir dir;
  const EpisodeSet set = make_set({3, 5, 2}, 4, 6);
  for (bool uint8_images : {false, true}) {
    const std::string root = dir.file(uint8_images ? "u8_replay.zarr" : "pusht_replay.zarr");
    write_replay_buffer(root, set, uint8_images);
    const EpisodeSet back = read_zarr_replay_buffer(root + "/");
    EXPECT_EQ(back.task, uint8_images ? "u8_replay" : "pusht_replay");
    EXPECT_EQ(back.image_height, 4);
    EXPECT_EQ(back.image_width, 6);
    EXPECT_EQ(back.state_dim, 5);
    EXPECT_EQ(back.action_dim, 2);
    EXPECT_EQ(back.episode_ends, set.episode_ends);
    EXPECT_EQ(back.state, set.state);
    EXPECT_EQ(back.action, set.action);
    EXPECT_EQ(back.images, set.images);
  }
}

TEST(ZarrReplayBuffer, WithoutImagesReadsTheLowDimensionalArrays) {
  TempDir dir;
  const EpisodeSet set = make_set({2, 2}, 1, 1);
  write_replay_buffer(dir.file("r"), set);
  std::filesystem::remove_all(dir.file("r/data/img"));
  const EpisodeSet back = read_zarr_replay_buffer(dir.file("r"));
  EXPECT_EQ(back.image_height, 0);
  EXPECT_TRUE(back.images.empty());
  EXPECT_EQ(back.state, set.state);
}

TEST(ZarrReplayBuffer, InconsistentOrForeignStoresAreNamed) {
  TempDir dir;
  const EpisodeSet set = make_set({3, 2}, 2, 2);
  const std::string root = dir.file("s.zarr");
  const auto fresh = [&] {
    std::filesystem::remove_all(root);
    write_replay_buffer(root, set);
  };
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(read_error(root), "no such zarr store"));
  testing::write_all_bytes(dir.file("s.zarr.zip"), {'P', 'K', 3, 4});
  EXPECT_TRUE(has(read_error(dir.file("s.zarr.zip")), "only zarr directory stores"));

  fresh();
  std::filesystem::remove(root + "/.zgroup");
  EXPECT_TRUE(has(read_error(root), "no .zgroup"));
  fresh();
  std::filesystem::remove_all(root + "/meta");
  EXPECT_TRUE(has(read_error(root), "has no meta/episode_ends"));

  fresh();  // action one step short
  write_zarr_array(root + "/data/action", {4, 2}, {4, 2}, "<f4", std::vector<float>(8, 0.0f));
  EXPECT_TRUE(has(read_error(root), root + "/data/action: has 4 steps, data/state has 5")) << read_error(root);
  fresh();  // episodes ending before the data does
  write_zarr_array(root + "/meta/episode_ends", {2}, {2}, "<i8", std::vector<int64_t>{3, 4});
  EXPECT_TRUE(has(read_error(root), "last episode ends at step 4")) << read_error(root);
  fresh();
  write_zarr_array(root + "/meta/episode_ends", {2}, {2}, "<i8", std::vector<int64_t>{5, 5});
  EXPECT_TRUE(has(read_error(root), "does not exceed the previous end")) << read_error(root);
  fresh();  // RGBA images
  write_zarr_array(root + "/data/img", {5, 2, 2, 4}, {5, 2, 2, 4}, "<f4", std::vector<float>(80, 0.0f));
  EXPECT_TRUE(has(read_error(root), "[steps, height, width, 3]")) << read_error(root);
  fresh();  // an image value beyond 255
  std::vector<float> img(5 * 2 * 2 * 3, 1.0f);
  img[17] = 300.0f;
  write_zarr_array(root + "/data/img", {5, 2, 2, 3}, {5, 2, 2, 3}, "<f4", img);
  EXPECT_TRUE(has(read_error(root), "element 17 = 300")) << read_error(root);
  fresh();  // state without the step dim
  write_zarr_array(root + "/data/state", {25}, {25}, "<f4", std::vector<float>(25, 0.0f));
  EXPECT_TRUE(has(read_error(root), "[steps, state_dim]")) << read_error(root);
}

// tests/episodes/fixtures/tiny_replay.zarr was written by real zarr (python3-zarr 2.13) with
// make_tiny_replay_zarr.py; the formulas and pinned numbers below are that script's.
TEST(ZarrReplayBuffer, MatchesAStoreWrittenByRealZarr) {
  const std::string root = std::string(SPARSEVIT_SOURCE_DIR) + "/tests/episodes/fixtures/tiny_replay.zarr";
  const EpisodeSet set = read_zarr_replay_buffer(root);
  const int64_t T = 7, H = 4, W = 5;
  EXPECT_EQ(set.task, "tiny_replay");
  EXPECT_EQ(set.episode_ends, (std::vector<int64_t>{3, 7}));
  ASSERT_EQ(set.image_height, H);
  ASSERT_EQ(set.image_width, W);
  ASSERT_EQ(set.images.size(), static_cast<size_t>(T * H * W * 3));
  size_t i = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        for (int64_t c = 0; c < 3; ++c, ++i) ASSERT_EQ(set.images[i], (t * 37 + y * 11 + x * 5 + c * 3) % 256) << i;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(set.state[t * 5 + j], static_cast<float>(t * 10 + j * 0.25));
    for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(set.action[t * 2 + j], static_cast<float>(t * -2.0 + j * 0.5 + 100.0));
  }
  // The script's printout.
  EXPECT_EQ(std::accumulate(set.images.begin(), set.images.end(), 0.0), 52866.0);
  EXPECT_EQ(set.images[((5 * H + 2) * W + 3) * 3 + 1], 225);
  EXPECT_EQ(std::accumulate(set.state.begin(), set.state.end(), 0.0), 1067.5);
  EXPECT_EQ(set.action[12], 88.0f);
  EXPECT_EQ(set.action[13], 88.5f);
  // An array the replay reader skips: its first chunk was never written (all fill value).
  const ZarrArray n_contacts(root + "/data/n_contacts");
  ASSERT_FALSE(std::filesystem::exists(root + "/data/n_contacts/0.0"));
  EXPECT_EQ(n_contacts.read_float32(), (std::vector<float>{0, 0, 0, 0, 0, 2, 2}));
  EXPECT_EQ(ZarrArray(root + "/data/keypoint").meta().compressor, ZarrCompressor::kGzip);
  EXPECT_EQ(ZarrArray(root + "/data/action").meta().dimension_separator, '/');
  EXPECT_EQ(ZarrArray(root + "/data/keypoint").read_float32(), std::vector<float>(T * 9 * 2, 0.0f));
}

}  // namespace
}  // namespace sparsevit::episodes
