// .npz archives through libzip: what np.savez / np.savez_compressed write (fixtures made by
// tests/util/fixtures/make_npz_fixtures.py), our own writer, and damaged archives.
#include "util/npz_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "util/errors.h"

namespace sparsevit {
namespace {

namespace fs = std::filesystem;
const std::string kFixtures = SPARSEVIT_SOURCE_DIR "/tests/util/fixtures/";

std::vector<int64_t> ints(const NpyArray& a) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < a.count(); ++i) v.push_back(a.int_at(i));
  return v;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class NpzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsevit_npz_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a RuntimeError: ") + e.what() + ">";
  }
  return "<no exception>";
}

TEST_F(NpzTest, ReadsNumpysStoredAndDeflatedArchives) {
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    SCOPED_TRACE(name);
    const NpzReader npz(kFixtures + name, "test");
    EXPECT_EQ(npz.members(), (std::vector<std::string>{"row_ptr", "col_idx", "mask"}));
    const NpyArray row_ptr = npz.read("row_ptr");
    EXPECT_EQ(row_ptr.dtype, NpyDtype::kInt64);
    EXPECT_EQ(row_ptr.shape, (std::vector<int64_t>{2, 4}));
    EXPECT_EQ(ints(row_ptr), (std::vector<int64_t>{0, 1, 3, 5, 0, 2, 3, 5}));
    const NpyArray col_idx = npz.read("col_idx");
    EXPECT_EQ(col_idx.dtype, NpyDtype::kInt32);
    EXPECT_EQ(ints(col_idx), (std::vector<int64_t>{0, 0, 1, 1, 2, 0, 0, 1, 2, 1, 2, 0}));
    const NpyArray mask = npz.read("mask");
    EXPECT_EQ(mask.dtype, NpyDtype::kBool);
    EXPECT_EQ(mask.shape, (std::vector<int64_t>{2, 3, 3}));
    EXPECT_EQ(ints(mask), (std::vector<int64_t>{1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1}));
  }
}

TEST_F(NpzTest, WritesStoredAndDeflatedArchivesThatReadBack) {
  const NpyArray a = make_npy_array(NpyDtype::kInt64, {2, 50}, std::vector<int64_t>(100, 7));
  const NpyArray b = make_npy_array(NpyDtype::kUInt8, {3}, {1, 2, 3});
  write_npz(path("stored.npz"), {{"a", a}, {"b", b}}, false);
  write_npz(path("deflated.npz"), {{"a", a}, {"b", b}}, true);
  EXPECT_LT(fs::file_size(path("deflated.npz")), fs::file_size(path("stored.npz")));
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    const NpzReader npz(path(name), "test");
    EXPECT_EQ(npz.members(), (std::vector<std::string>{"a", "b"})) << name;
    EXPECT_EQ(npz.read("a").bytes, a.bytes) << name;
    EXPECT_EQ(npz.read("b").shape, b.shape) << name;
    EXPECT_TRUE(npz.has("b"));
    EXPECT_FALSE(npz.has("c"));
  }
}

TEST_F(NpzTest, MissingFilesMembersAndNonArchivesAreErrorsNamingThem) {
  const std::string missing = error_of([&] { NpzReader(path("none.npz"), "file"); });
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
  EXPECT_NE(missing.find("none.npz"), std::string::npos) << missing;
  const std::string text = write("text.npz", "not a zip archive at all, just text");
  EXPECT_NE(error_of([&] { NpzReader(text, "file"); }).find("not a readable .npz"), std::string::npos);
  const NpzReader npz(kFixtures + "stored.npz", "file");
  const std::string member = error_of([&] { npz.read("scores"); });
  EXPECT_NE(member.find("no array 'scores'"), std::string::npos) << member;
  EXPECT_NE(member.find("row_ptr, col_idx, mask"), std::string::npos) << member;
}

TEST_F(NpzTest, DamagedArchivesAreErrorsNotCrashes) {
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    const std::string good = read_bytes(kFixtures + name);
    // Truncated anywhere: the central directory or a member is missing.
    for (std::size_t cut : {std::size_t{10}, good.size() / 2, good.size() - 1}) {
      const std::string p = write("cut.npz", good.substr(0, cut));
      try {
        const NpzReader npz(p, "file");
        for (const auto& m : npz.members()) npz.read(m);
        ADD_FAILURE() << name << " cut at " << cut << " was read";
      } catch (const RuntimeError&) {
      }
    }
    // A flipped byte in the first member's data: a CRC or deflate error, or a bad .npy.
    std::string flipped = good;
    flipped[100] = static_cast<char>(flipped[100] ^ 0x5a);
    const std::string p = write("flipped.npz", flipped);
    EXPECT_THROW(
        {
          const NpzReader npz(p, "file");
          npz.read("row_ptr");
        },
        RuntimeError)
        << name;
  }
}

}  // namespace
}  // namespace sparsevit
