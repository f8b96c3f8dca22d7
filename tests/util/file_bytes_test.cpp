// The one whole-file reader (datasets, safetensors, zarr): exact bytes, errors that start with
// the file's path, and the bounded variant that refuses a longer file without reading it all.
#include "util/file_bytes.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "util/errors.h"

namespace sparsevit {
namespace {

namespace fs = std::filesystem;

class FileBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsevit_file_bytes_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }
  static std::string error_of(const std::function<void()>& read) {
    try {
      read();
    } catch (const RuntimeError& e) {
      return e.what();
    }
    return "(no RuntimeError)";
  }

  fs::path dir_;
};

// Every byte value, and more than one 64 KiB read.
std::vector<uint8_t> pattern_bytes(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + i / 256) & 0xff);
  return bytes;
}

TEST_F(FileBytesTest, ReadsTheExactBytes) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{300001}}) {
    const std::vector<uint8_t> bytes = pattern_bytes(n);
    EXPECT_EQ(read_file_bytes(write("f" + std::to_string(n), bytes)), bytes) << n;
  }
}

TEST_F(FileBytesTest, ReadsFilesWhoseSizeIsNotKnownAhead) {
  // /proc files report size 0 and still hold text; a pipe has no size at all.
  const std::vector<uint8_t> status = read_file_bytes("/proc/self/status");
  EXPECT_NE(std::string(status.begin(), status.end()).find("Pid:"), std::string::npos);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<uint8_t> bytes = pattern_bytes(100000);
  std::thread writer([&] {
    std::ofstream(fifo, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  });
  EXPECT_EQ(read_file_bytes(fifo), bytes);
  writer.join();
}

TEST_F(FileBytesTest, ErrorsNameTheFile) {
  const std::string missing = (dir_ / "missing.bin").string();
  const std::string open_error = error_of([&] { read_file_bytes(missing); });
  EXPECT_EQ(open_error.rfind(missing + ": cannot open: ", 0), 0u) << open_error;
  EXPECT_NE(open_error.find("No such file"), std::string::npos) << open_error;
  const std::string folder_error = error_of([&] { read_file_bytes(dir_.string()); });
  EXPECT_EQ(folder_error.rfind(dir_.string() + ": cannot read: ", 0), 0u) << folder_error;
}

TEST_F(FileBytesTest, TheBoundedReadRefusesALongerFile) {
  const std::vector<uint8_t> bytes = pattern_bytes(70000);
  const std::string path = write("chunk", bytes);
  EXPECT_EQ(read_file_bytes(path, 70000), bytes);
  EXPECT_EQ(read_file_bytes(path, 1 << 20), bytes);
  const std::string error = error_of([&] { read_file_bytes(path, 69999); });
  EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
  EXPECT_NE(error.find("69999 bytes"), std::string::npos) << error;
  EXPECT_EQ(read_file_bytes(write("empty", {}), 0), std::vector<uint8_t>{});
  // Without a size to check first, the bound holds while reading.
  const std::string proc_error = error_of([] { read_file_bytes("/proc/self/status", 10); });
  EXPECT_EQ(proc_error.rfind("/proc/self/status: longer than the 10 bytes", 0), 0u) << proc_error;
}

}  // namespace
}  // namespace sparsevit
