// episodes::read_demonstrations: the one rule that picks the reader of a demonstrations path
// (a folder or *.zarr.zip: zarr; any other file: .episodes), shown by which reader's result or
// error comes back, and its own one-line errors for an empty or missing path.
#include "episodes/demonstrations.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "episode_test_util.h"
#include "episodes/episode_file.h"
#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

using testing::make_set;
using testing::TempDir;
using testing::write_all_bytes;

std::string error_of(const std::string& path) {
  try {
    read_demonstrations(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Demonstrations, AFileIsReadAsEpisodes) {
  TempDir dir;
  const EpisodeSet set = make_set({3, 2});
  write_episode_file(dir.file("a.episodes"), set);
  EXPECT_EQ(demonstration_format(dir.file("a.episodes")), DemonstrationFormat::kEpisodeFile);
  const EpisodeSet back = read_demonstrations(dir.file("a.episodes"));
  EXPECT_EQ(back.episode_ends, set.episode_ends);
  EXPECT_EQ(back.state, set.state);
  // Any other file goes to the same reader, which names it.
  write_all_bytes(dir.file("notes.txt"), {'h', 'i'});
  const std::string e = error_of(dir.file("notes.txt"));
  EXPECT_TRUE(has(e, "notes.txt")) << e;
  EXPECT_FALSE(has(e, "zarr")) << e;
}

TEST(Demonstrations, AFolderOrAZippedStoreGoesToTheZarrReader) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("store.zarr"));
  EXPECT_EQ(demonstration_format(dir.file("store.zarr")), DemonstrationFormat::kZarrReplayBuffer);
  EXPECT_TRUE(has(error_of(dir.file("store.zarr")), "no .zgroup")) << error_of(dir.file("store.zarr"));
  write_all_bytes(dir.file("s.zarr.zip"), {'P', 'K', 3, 4});
  EXPECT_EQ(demonstration_format(dir.file("s.zarr.zip")), DemonstrationFormat::kZarrReplayBuffer);
  EXPECT_TRUE(has(error_of(dir.file("s.zarr.zip")), "only zarr directory stores")) << error_of(dir.file("s.zarr.zip"));
}

TEST(Demonstrations, AnEmptyOrMissingPathIsAUsageErrorInOneLine) {
  TempDir dir;
  EXPECT_THROW(read_demonstrations(""), UsageError);
  EXPECT_TRUE(has(error_of(""), "no demonstrations given: --data_path names a .episodes file"));
  EXPECT_THROW(read_demonstrations(dir.file("missing.episodes")), UsageError);
  EXPECT_EQ(error_of(dir.file("missing.episodes")), "demonstrations '" + dir.file("missing.episodes") + "' do not exist");
}

}  // namespace
}  // namespace sparsevit::episodes
