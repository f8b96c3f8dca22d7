// write_mask_png: geometry, colours (read back with libpng), atomic write and error reporting.
#include <gtest/gtest.h>
#include <png.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/mask_png.h"
#include "patterns/pattern.h"
#include "util/errors.h"

namespace sparsevit::analysis {

// GoogleTest printer for colour mismatches.
void PrintTo(const Rgb& c, std::ostream* os) {
  *os << "rgb(" << int(c.r) << "," << int(c.g) << "," << int(c.b) << ")";
}

namespace {

namespace fs = std::filesystem;
namespace col = mask_png_colors;

struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgb;
  Rgb at(int64_t x, int64_t y) const {
    const size_t i = 3 * (static_cast<size_t>(y) * width + static_cast<size_t>(x));
    return Rgb{rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

// Reads an 8-bit RGB PNG with libpng's simplified API; also checks the stored format.
Image read_png(const std::string& path) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_file(&image, path.c_str())) << image.message;
  EXPECT_EQ(image.format, static_cast<png_uint_32>(PNG_FORMAT_RGB)) << "stored as 8-bit RGB";
  image.format = PNG_FORMAT_RGB;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) << image.message;
  return out;
}

class MaskPng : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sparsevit_mask_png_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// 4 tokens (token 0 = class token), 3 heads:
//   head 0: the main diagonal; head 1: all pairs; head 2: key j+1 (none for the last row).
patterns::Pattern small_pattern(int32_t prefix) {
  patterns::Pattern p(4, 3, prefix);
  p.set_head(0, [](int32_t j, std::vector<int32_t>& keys) { keys.push_back(j); });
  p.set_head(1, [](int32_t, std::vector<int32_t>& keys) { keys = {0, 1, 2, 3}; });
  p.set_head(2, [](int32_t j, std::vector<int32_t>& keys) {
    if (j + 1 < 4) keys.push_back(j + 1);
  });
  return p;
}

TEST_F(MaskPng, Layout) {
  const auto p = small_pattern(1);
  MaskPngOptions opt;
  opt.scale = 2;
  const auto layout = mask_png_layout(p, opt);
  EXPECT_EQ(layout.columns, 2);  // ceil(sqrt(3))
  EXPECT_EQ(layout.rows, 2);
  EXPECT_EQ(layout.scale, 2);
  EXPECT_EQ(layout.width, 2 * 8 + 2);
  EXPECT_EQ(layout.height, 2 * 8 + 2);
  EXPECT_EQ(layout.block_x(2), 0);
  EXPECT_EQ(layout.block_y(2), 10);
  EXPECT_EQ(layout.block_x(1), 10);

  // Automatic scale: the largest that keeps the width <= 1600.
  patterns::Pattern vit(197, 12, 1);
  const auto auto_layout = mask_png_layout(vit);
  EXPECT_EQ(auto_layout.columns, 4);
  EXPECT_EQ(auto_layout.rows, 3);
  EXPECT_EQ(auto_layout.scale, 2);  // 4*197*2 + 6 = 1582
  EXPECT_LE(auto_layout.width, 1600);
  // Never below one pixel per token.
  patterns::Pattern big(1000, 16, 0);
  EXPECT_EQ(mask_png_layout(big).scale, 1);
  // Explicit columns, clamped to the number of heads.
  opt.columns = 10;
  EXPECT_EQ(mask_png_layout(p, opt).columns, 3);
  EXPECT_EQ(mask_png_layout(p, opt).rows, 1);
  opt.columns = -1;
  EXPECT_THROW(mask_png_layout(p, opt), UsageError);
}

TEST_F(MaskPng, PixelsWithClassToken) {
  const auto p = small_pattern(1);
  const std::string path = (dir_ / "mask.png").string();
  MaskPngOptions opt;
  opt.scale = 2;
  write_mask_png(p, path, opt);
  const Image img = read_png(path);
  ASSERT_EQ(img.width, 18u);
  ASSERT_EQ(img.height, 18u);
  // Pixel of token (row j, key k) of head h, sampling the bottom-right pixel of the cell.
  auto cell = [&](int32_t h, int32_t j, int32_t k) {
    const int64_t x = (h % 2) * 10 + k * 2 + 1;
    const int64_t y = (h / 2) * 10 + j * 2 + 1;
    return img.at(x, y);
  };
  // Head 0: diagonal. (0,0) is in the class row -> blue; (2,2) dark; (2,3) white; (2,0) light blue.
  EXPECT_EQ(cell(0, 0, 0), col::kClassAllowed);
  EXPECT_EQ(cell(0, 2, 2), col::kAllowed);
  EXPECT_EQ(cell(0, 2, 3), col::kMasked);
  EXPECT_EQ(cell(0, 2, 0), col::kClassMasked);
  EXPECT_EQ(cell(0, 0, 3), col::kClassMasked);
  // Head 1: everything allowed; class row/column blue, the rest dark.
  EXPECT_EQ(cell(1, 0, 2), col::kClassAllowed);
  EXPECT_EQ(cell(1, 3, 0), col::kClassAllowed);
  EXPECT_EQ(cell(1, 3, 3), col::kAllowed);
  // Head 2 (second grid row): key j+1.
  EXPECT_EQ(cell(2, 1, 2), col::kAllowed);
  EXPECT_EQ(cell(2, 0, 1), col::kClassAllowed);
  EXPECT_EQ(cell(2, 3, 3), col::kMasked);
  EXPECT_EQ(cell(2, 2, 2), col::kMasked);
  // Every pixel of a cell has the cell's colour (scale 2).
  EXPECT_EQ(img.at(2 * 2, 2 * 2), col::kAllowed);  // head 0, (2,2), top-left pixel
  // Gutters and the unused fourth cell.
  EXPECT_EQ(img.at(8, 0), col::kGutter);
  EXPECT_EQ(img.at(9, 5), col::kGutter);
  EXPECT_EQ(img.at(3, 8), col::kGutter);
  EXPECT_EQ(img.at(3, 9), col::kGutter);
  EXPECT_EQ(img.at(12, 12), col::kGutter);
  EXPECT_EQ(img.at(17, 17), col::kGutter);
  // No temporary files are left behind.
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "mask.png");
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(MaskPng, NoClassTokenHasNoTint) {
  const auto p = small_pattern(0);
  const std::string path = (dir_ / "plain.png").string();
  MaskPngOptions opt;
  opt.scale = 1;
  opt.columns = 3;
  write_mask_png(p, path, opt);
  const Image img = read_png(path);
  ASSERT_EQ(img.width, 3u * 4u + 2u * 2u);
  ASSERT_EQ(img.height, 4u);
  EXPECT_EQ(img.at(0, 0), col::kAllowed);  // head 0 (0,0)
  EXPECT_EQ(img.at(0, 1), col::kMasked);   // head 0 (1,0)
  EXPECT_EQ(img.at(4, 0), col::kGutter);
  EXPECT_EQ(img.at(6, 3), col::kAllowed);  // head 1 (3,0)
  EXPECT_EQ(img.at(12, 0), col::kMasked);  // head 2 (0,0)
  EXPECT_EQ(img.at(13, 0), col::kAllowed);  // head 2 (0,1)
}

TEST_F(MaskPng, OverwritesExistingFile) {
  const std::string path = (dir_ / "again.png").string();
  { std::FILE* f = std::fopen(path.c_str(), "wb"); ASSERT_NE(f, nullptr); std::fputs("junk", f); std::fclose(f); }
  write_mask_png(small_pattern(1), path);
  const Image img = read_png(path);
  EXPECT_GT(img.width, 0u);
}

TEST_F(MaskPng, UnwritablePathThrowsRuntimeError) {
  const std::string missing_dir = (dir_ / "no_such_dir" / "mask.png").string();
  try {
    write_mask_png(small_pattern(1), missing_dir);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(missing_dir), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // The target is an existing directory: the rename fails, and the temporary file is removed.
  const fs::path as_dir = dir_ / "taken.png";
  fs::create_directories(as_dir / "child");
  EXPECT_THROW(write_mask_png(small_pattern(1), as_dir.string()), RuntimeError);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1u);  // only taken.png/
}

TEST_F(MaskPng, WriteFailureMidImageThrowsAndCleansUp) {
  // Make writes fail part-way (file size limit, SIGXFSZ ignored -> EFBIG) so the error comes
  // from inside libpng's row writing or the final flush; it must surface as RuntimeError,
  // not a crash, and leave no temporary file.
  patterns::Pattern noisy(600, 1, 0);
  uint64_t state = 88172645463325252ULL;  // xorshift64: incompressible-ish key sets
  noisy.set_head(0, [&](int32_t, std::vector<int32_t>& keys) {
    for (int32_t k = 0; k < 600; ++k) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      if (state & 1) keys.push_back(k);
    }
  });
  const std::string path = (dir_ / "big.png").string();
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 8192;
  if (old_limit.rlim_max != RLIM_INFINITY && old_limit.rlim_max < small.rlim_cur) GTEST_SKIP();
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  std::string what;
  try {
    MaskPngOptions opt;
    opt.scale = 1;
    write_mask_png(noisy, path, opt);
  } catch (const RuntimeError& e) {
    threw = true;
    what = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_TRUE(fs::is_empty(dir_)) << "temporary file left behind";
  // With the limit lifted the same image writes fine.
  MaskPngOptions opt;
  opt.scale = 1;
  write_mask_png(noisy, path, opt);
  EXPECT_EQ(read_png(path).width, 600u);
}

TEST_F(MaskPng, EmptyPatternIsAUsageError) {
  patterns::Pattern empty;
  EXPECT_THROW(write_mask_png(empty, (dir_ / "e.png").string()), UsageError);
}

}  // namespace
}  // namespace sparsevit::analysis
