#include <gtest/gtest.h>
#include <png.h>
#include <zlib.h>

#include <ATen/ATen.h>

#include <cstring>

#include "data/dataset.h"
#include "data/image_codec.h"
#include "data/image_folder_dataset.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using testing::write_file;
namespace fs = std::filesystem;

Image make_rgb(int64_t w, int64_t h, int seed) {
  Image img{w, h, 3, {}};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      img.pixels.push_back(static_cast<uint8_t>((x * 8 + seed * 40) % 256));
      img.pixels.push_back(static_cast<uint8_t>((y * 8 + seed * 20) % 256));
      img.pixels.push_back(static_cast<uint8_t>((x * 4 + y * 4 + seed) % 256));
    }
  return img;
}

// Writes a PNG with libpng's simplified API in any format (colormapped ones need `colormap`).
void write_png_format(const std::string& path, uint32_t w, uint32_t h, uint32_t format, const void* pixels,
                      const void* colormap = nullptr, uint32_t colormap_entries = 0) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = format;
  png.colormap_entries = colormap_entries;
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_NE(png_image_write_to_file(&png, path.c_str(), 0, pixels, 0, colormap), 0) << png.message;
}

void put_png(const std::string& path, const Image& img) {
  fs::create_directories(fs::path(path).parent_path());
  write_png(path, img);
}

void put_jpeg(const std::string& path, const Image& img, int quality = 95) {
  fs::create_directories(fs::path(path).parent_path());
  write_jpeg(path, img, quality);
}

at::Tensor chw(const Image& img) {
  return at::from_blob(const_cast<uint8_t*>(img.pixels.data()), {img.height, img.width, img.channels},
                       at::TensorOptions().dtype(at::kByte))
      .permute({2, 0, 1})
      .contiguous();
}

}  // namespace

TEST(ImageFolder, ClassesFromSortedFoldersAndPixelsRoundTrip) {
  TempDir dir;
  const Image a = make_rgb(9, 7, 1), b = make_rgb(9, 7, 2), c = make_rgb(5, 6, 3);
  fs::create_directories(dir.path() / "train" / "zebra");
  put_png(dir / "train/zebra/a.png", a);
  put_png(dir / "train/cat/b.PNG", b);
  put_jpeg(dir / "train/cat/c.jpg", c, 100);
  write_file(dir / "train/cat/notes.txt", {'h', 'i'});
  auto ds = ImageFolderDataset::from_root(dir.path().string(), true);
  ASSERT_EQ(ds->size(), 3);
  EXPECT_EQ(ds->classes(), (std::vector<std::string>{"cat", "zebra"}));
  EXPECT_EQ(ds->num_classes(), 2);
  EXPECT_EQ(ds->channels(), 3);
  // Sorted paths: cat/b.PNG, cat/c.jpg, zebra/a.png.
  EXPECT_EQ(ds->label(0), 0);
  EXPECT_EQ(ds->label(1), 0);
  EXPECT_EQ(ds->label(2), 1);
  EXPECT_TRUE(at::equal(ds->get(0).image, chw(b)));
  EXPECT_TRUE(at::equal(ds->get(2).image, chw(a)));
  const Sample jpeg = ds->get(1);
  ASSERT_EQ(jpeg.image.sizes(), (at::IntArrayRef{3, 6, 5}));
  const double max_err =
      (jpeg.image.to(at::kFloat) - chw(c).to(at::kFloat)).abs().max().item<double>();
  EXPECT_LE(max_err, 8.0);  // quality 100, 4:4:4
}

TEST(ImageFolder, NoSplitFolderUsesTheRootAndValSharesTrainClasses) {
  TempDir flat;
  put_png(flat / "b/x.png", make_rgb(4, 4, 0));
  put_png(flat / "a/y.png", make_rgb(4, 4, 1));
  auto ds = make_dataset("image_folder", flat.path().string(), true);
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->label(0), 0);  // a/y.png

  TempDir split;
  put_png(split / "train/a/1.png", make_rgb(4, 4, 0));
  put_png(split / "train/b/1.png", make_rgb(4, 4, 0));
  put_png(split / "train/c/1.png", make_rgb(4, 4, 0));
  put_png(split / "val/c/2.png", make_rgb(4, 4, 0));
  auto val = ImageFolderDataset::from_root(split.path().string(), false);
  EXPECT_EQ(val->num_classes(), 3);
  ASSERT_EQ(val->size(), 1);
  EXPECT_EQ(val->label(0), 2);  // index among the training classes
  put_png(split / "val/unknown/3.png", make_rgb(4, 4, 0));
  expect_error<UsageError>([&] { ImageFolderDataset::from_root(split.path().string(), false); },
                           {"unknown", "not one of the 3 training classes"});
}

TEST(ImageFolder, TinyImageNetLayout) {
  TempDir dir;
  put_jpeg(dir / "train/n02/images/n02_0.JPEG", make_rgb(8, 8, 0));
  put_jpeg(dir / "train/n01/images/n01_0.JPEG", make_rgb(8, 8, 1));
  write_file(dir / "train/n01/n01_boxes.txt", {'x'});
  put_jpeg(dir / "val/images/val_0.JPEG", make_rgb(8, 8, 2));
  put_jpeg(dir / "val/images/val_1.JPEG", make_rgb(8, 8, 3));
  const std::string ann = "val_0.JPEG\tn02\t0\t0\t8\t8\nval_1.JPEG\tn01\t0\t0\t8\t8\n";
  write_file(dir / "val/val_annotations.txt", std::vector<uint8_t>(ann.begin(), ann.end()));
  auto train = ImageFolderDataset::from_root(dir.path().string(), true);
  EXPECT_EQ(train->size(), 2);
  auto val = ImageFolderDataset::from_root(dir.path().string(), false);
  ASSERT_EQ(val->size(), 2);
  EXPECT_EQ(val->label(0), 1);
  EXPECT_EQ(val->label(1), 0);
  EXPECT_EQ(val->get(1).image.sizes(), (at::IntArrayRef{3, 8, 8}));
}

TEST(ImageFolder, GrayPaletteAlphaAnd16BitPngs) {
  TempDir dir;
  // Gray 8-bit.
  const std::vector<uint8_t> gray = {0, 50, 100, 150, 200, 250};
  write_png_format(dir / "c/gray.png", 3, 2, PNG_FORMAT_GRAY, gray.data());
  // Palette: indices into a 3-entry RGB colour map.
  const std::vector<uint8_t> indices = {0, 1, 2, 1};
  const std::vector<uint8_t> colormap = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  write_png_format(dir / "c/palette.png", 2, 2, PNG_FORMAT_RGB_COLORMAP, indices.data(), colormap.data(), 3);
  // RGBA: opaque red, transparent green (composited on black).
  const std::vector<uint8_t> rgba = {255, 0, 0, 255, 0, 255, 0, 0};
  write_png_format(dir / "c/alpha.png", 2, 1, PNG_FORMAT_RGBA, rgba.data());
  // 16-bit gray (linear): black and white survive exactly.
  const std::vector<uint16_t> gray16 = {0, 65535};
  write_png_format(dir / "c/deep.png", 2, 1, PNG_FORMAT_LINEAR_Y, gray16.data());

  ImageFolderDataset rgb(dir.path().string());
  ASSERT_EQ(rgb.size(), 4);  // alpha, deep, gray, palette
  const at::Tensor alpha = rgb.get(0).image;
  EXPECT_EQ(alpha.sizes(), (at::IntArrayRef{3, 1, 2}));
  EXPECT_TRUE(at::equal(alpha.select(2, 0).flatten(), at::tensor({255, 0, 0}, at::kByte)));
  EXPECT_TRUE(at::equal(alpha.select(2, 1).flatten(), at::tensor({0, 0, 0}, at::kByte)));
  const at::Tensor deep = rgb.get(1).image;
  EXPECT_TRUE(at::equal(deep.select(2, 0).flatten(), at::tensor({0, 0, 0}, at::kByte)));
  EXPECT_TRUE(at::equal(deep.select(2, 1).flatten(), at::tensor({255, 255, 255}, at::kByte)));
  const at::Tensor g = rgb.get(2).image;
  ASSERT_EQ(g.sizes(), (at::IntArrayRef{3, 2, 3}));
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(at::equal(g[c].flatten(), at::tensor(gray, at::kByte)));
  const at::Tensor pal = rgb.get(3).image;
  EXPECT_TRUE(at::equal(pal.select(1, 0).select(1, 1), at::tensor({0, 255, 0}, at::kByte)));
  EXPECT_TRUE(at::equal(pal.select(1, 1).select(1, 0), at::tensor({0, 0, 255}, at::kByte)));

  // One channel: gray stays exact; colour reduces to luminance.
  ImageFolderDataset mono(dir.path().string(), {}, 1);
  EXPECT_EQ(mono.channels(), 1);
  EXPECT_TRUE(at::equal(mono.get(2).image.flatten(), at::tensor(gray, at::kByte)));
  EXPECT_EQ(mono.get(3).image.sizes(), (at::IntArrayRef{1, 2, 2}));
}

TEST(ImageFolder, GrayJpegToRgb) {
  TempDir dir;
  Image gray{6, 4, 1, std::vector<uint8_t>(24, 0)};
  for (std::size_t i = 0; i < gray.pixels.size(); ++i) gray.pixels[i] = static_cast<uint8_t>(i * 10);
  put_jpeg(dir / "k/g.jpeg", gray, 100);
  ImageFolderDataset ds(dir.path().string());
  const at::Tensor img = ds.get(0).image;
  ASSERT_EQ(img.sizes(), (at::IntArrayRef{3, 4, 6}));
  EXPECT_TRUE(at::equal(img[0], img[1]));
  EXPECT_TRUE(at::equal(img[0], img[2]));
}

TEST(ImageFolder, UnreadableImagesNameTheFile) {
  TempDir dir;
  put_png(dir / "a/good.png", make_rgb(4, 4, 0));
  write_file(dir / "a/fake.png", {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  write_file(dir / "a/empty.jpg", {});
  auto png = encode_png(make_rgb(16, 16, 1));
  png.resize(png.size() / 2);
  write_file(dir / "b/cut.png", png);
  auto jpg = encode_jpeg(make_rgb(32, 32, 2), 90);
  jpg.resize(jpg.size() / 2);
  write_file(dir / "b/cut.jpg", jpg);
  ImageFolderDataset ds(dir.path().string());
  ASSERT_EQ(ds.size(), 5);  // a/empty.jpg, a/fake.png, a/good.png, b/cut.jpg, b/cut.png
  expect_error<RuntimeError>([&] { ds.get(0); }, {"empty.jpg", "empty file"});
  expect_error<RuntimeError>([&] { ds.get(1); }, {"fake.png", "not a JPEG or PNG"});
  EXPECT_EQ(ds.get(2).image.size(0), 3);
  expect_error<RuntimeError>([&] { ds.get(3); }, {"cut.jpg"});
  expect_error<RuntimeError>([&] { ds.get(4); }, {"cut.png"});
  expect_error<RuntimeError>([&] { read_image((dir.path() / "a/missing.png").string(), 3); }, {"missing.png"});
}

TEST(ImageCodec, HeadersClaimingHugeImagesAreRefusedBeforeAllocating) {
  // Fuzzer finding: a JPEG header claiming 55551 x 23551 pixels made the decoder allocate 3.7 GiB.
  Image small;
  small.width = 16;
  small.height = 16;
  small.channels = 3;
  small.pixels.assign(16 * 16 * 3, 100);
  std::vector<uint8_t> jpeg = encode_jpeg(small);
  bool patched = false;
  for (std::size_t i = 0; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {  // start of frame: height and width at +5, +7
      jpeg[i + 5] = 0xD8;
      jpeg[i + 6] = 0xFF;
      jpeg[i + 7] = 0x5B;
      jpeg[i + 8] = 0xFF;
      patched = true;
      break;
    }
  }
  ASSERT_TRUE(patched);
  try {
    decode_image(jpeg.data(), jpeg.size(), 3, "huge.jpg");
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("huge.jpg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2^26"), std::string::npos) << e.what();
  }
  // The same for a PNG whose IHDR claims 20000 x 20000 (the width and height at bytes 16..23).
  std::vector<uint8_t> png = encode_png(small);
  png[16] = 0; png[17] = 0; png[18] = 0x4E; png[19] = 0x20;
  png[20] = 0; png[21] = 0; png[22] = 0x4E; png[23] = 0x20;
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), png.data() + 12, 17);  // chunk type + IHDR data
  for (int b = 0; b < 4; ++b) png[29 + b] = static_cast<uint8_t>(crc >> (8 * (3 - b)));
  try {
    decode_image(png.data(), png.size(), 3, "huge.png");
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
}

TEST(ImageFolder, EmptyTreeIsAUsageError) {
  TempDir dir;
  fs::create_directories(dir.path() / "a");
  expect_error<UsageError>([&] { ImageFolderDataset ds(dir.path().string()); }, {"no .jpg/.jpeg/.png images"});
}

}  // namespace sparsevit::data
