// Fixture writers shared by the data tests: temp folders, IDX / CIFAR files, gzip, video frames.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <functional>
#include <string>
#include <vector>

#include "data/video_clip.h"
#include "util/errors.h"

namespace sparsevit::data::testing {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sparsevit_data_XXXXXX").string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  }
  std::fclose(f);
}

// The whole file `path` as a string of bytes ("" when it cannot be read).
inline std::string read_string(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The bytes of `bytes` (text or not) as the file `path`, its folders created.
inline void write_string(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::vector<uint8_t> gzip(const std::vector<uint8_t>& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64);
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

inline void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v >> 24));
  b.push_back(static_cast<uint8_t>(v >> 16));
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

// The pixel value every fixture uses: a function of (sample, row, col).
inline uint8_t fixture_pixel(int64_t n, int64_t r, int64_t c) { return static_cast<uint8_t>((n * 37 + r * 7 + c * 3) % 256); }

inline std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 2051) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  put_be32(b, n);
  put_be32(b, rows);
  put_be32(b, cols);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) b.push_back(fixture_pixel(i, r, c));
  return b;
}

inline std::vector<uint8_t> idx_labels(uint32_t n, uint32_t classes = 10, uint32_t magic = 2049) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  put_be32(b, n);
  for (uint32_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(i % classes));
  return b;
}

// Smooth, moving uint8 [C, T, H, W] video frames within [20, 237] (no clipping in limited-range
// YUV, so lossy codecs stay close) that vary along x and y (so crops, flips and windows differ);
// every channel and frame differs.
inline at::Tensor smooth_frames(int64_t channels, int64_t count, int64_t height, int64_t width) {
  at::Tensor frames = at::empty({channels, count, height, width}, at::kByte);
  auto a = frames.accessor<uint8_t, 4>();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < count; ++t)
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x)
          a[c][t][y][x] = static_cast<uint8_t>(20 + (x * 90) / width + (y * 60) / height + 3 * t + 20 * c);
  return frames;
}

inline VideoClip smooth_clip(int64_t channels, int64_t count, int64_t height, int64_t width, double fps) {
  return VideoClip{smooth_frames(channels, count, height, width), fps};
}

// Runs fn and checks it throws E whose message contains every one of `parts`.
template <class E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception containing '" << (parts.empty() ? "" : parts[0]) << "'";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nmissing: " << part;
  }
}

}  // namespace sparsevit::data::testing
