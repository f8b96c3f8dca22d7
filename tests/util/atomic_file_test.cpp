// The one file writer: complete files or the old ones, unique temporaries, nothing left behind.
#include "util/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "util/errors.h"

namespace sparsevit {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsevit_atomic_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string read(const fs::path& p) const {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  int leftovers() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
    return n;
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesAndReplacesWholeFiles) {
  const fs::path p = dir_ / "a.json";
  write_file_atomically(p.string(), "first");
  EXPECT_EQ(read(p), "first");
  AtomicFile f(p.string());
  f.write("0123456789");
  f.write_at(2, "ab", 2);
  EXPECT_EQ(read(p), "first");  // not visible before commit
  f.commit();
  EXPECT_EQ(read(p), "01ab456789");
  EXPECT_EQ(leftovers(), 0);
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::others_read, fs::perms::others_read);
}

TEST_F(AtomicFileTest, AnAbandonedWriteLeavesTheOldFileAndNoTemporary) {
  const fs::path p = dir_ / "ck.pt";
  write_file_atomically(p.string(), "old");
  try {
    AtomicFile f(p.string());
    f.write("half of the new");
    throw std::runtime_error("crash before commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read(p), "old");
  EXPECT_EQ(leftovers(), 0);
  // A crash between sync and rename (the test hook throws): the same.
  detail::set_before_rename_hook([](const std::string&) { throw std::runtime_error("crash before rename"); });
  EXPECT_THROW(write_file_atomically(p.string(), "new"), std::runtime_error);
  detail::set_before_rename_hook({});
  EXPECT_EQ(read(p), "old");
  EXPECT_EQ(leftovers(), 0);
}

TEST_F(AtomicFileTest, ConcurrentWritersOfOnePathNeverShareATemporary) {
  // A fixed temporary name would let two writers interleave into one file; with unique names
  // the result is always one writer's complete content.
  const fs::path p = dir_ / "summary.json";
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      const std::string text(100000, static_cast<char>('a' + w));
      for (int i = 0; i < 20; ++i) write_file_atomically(p.string(), text);
    });
  }
  for (auto& t : writers) t.join();
  const std::string final_text = read(p);
  ASSERT_EQ(final_text.size(), 100000u);
  EXPECT_EQ(final_text, std::string(100000, final_text.front()));
  EXPECT_EQ(leftovers(), 0);
}

TEST_F(AtomicFileTest, AMissingFolderIsAClearError) {
  try {
    write_file_atomically((dir_ / "no" / "such" / "dir.json").string(), "x");
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dir.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparsevit
