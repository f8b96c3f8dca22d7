#include "episodes/zarr_array.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "episode_test_util.h"
#include "util/errors.h"
#include "zarr_test_writer.h"

namespace sparsevit::episodes {
namespace {

using testing::TempDir;
using testing::write_text;
using testing::write_zarr_array;
using testing::ZarrWriteOptions;

std::vector<float> ramp(size_t n, float scale = 0.5f) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * scale - 3.0f;
  return values;
}

std::string open_error(const std::string& dir) {
  try {
    ZarrArray array(dir);
    array.read_float32();
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ZarrArray, ReadsMetadata) {
  TempDir dir;
  write_zarr_array(dir.file("a"), {7, 3}, {3, 2}, "<f4", ramp(21));
  const ZarrArray array(dir.file("a"));
  EXPECT_EQ(array.shape(), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(array.meta().chunks, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(array.meta().dtype, ZarrDtype::kFloat32);
  EXPECT_EQ(array.meta().compressor, ZarrCompressor::kBlosc);
  EXPECT_EQ(array.num_elements(), 21);
  EXPECT_EQ(array.chunk_path({2, 1}), dir.file("a") + "/2.1");
}

// Partial edge chunks in both dims (7 = 3+3+1, 3 = 2+1), every compressor and Blosc codec and
// shuffle; the padding of edge chunks is garbage (0xAB) that must not leak into the values.
TEST(ZarrArray, EveryCompressorRoundTripsMultiChunkArraysWithPartialEdges) {
  TempDir dir;
  const std::vector<float> values = ramp(7 * 3 * 4);
  std::vector<ZarrWriteOptions> all;
  for (const char* compressor : {"none", "zlib", "gzip"}) {
    ZarrWriteOptions o;
    o.compressor = compressor;
    all.push_back(o);
  }
  for (const char* cname : {"blosclz", "lz4", "lz4hc", "zlib", "zstd"})
    for (int shuffle : {0, 1, 2}) {
      ZarrWriteOptions o;
      o.blosc_cname = cname;
      o.blosc_shuffle = shuffle;
      all.push_back(o);
    }
  int n = 0;
  for (const auto& options : all) {
    const std::string path = dir.file("c" + std::to_string(n++));
    write_zarr_array(path, {7, 3, 4}, {3, 2, 4}, "<f4", values, options);
    EXPECT_EQ(ZarrArray(path).read_float32(), values) << options.compressor << " " << options.blosc_cname << " "
                                                      << options.blosc_shuffle;
  }
}

// Contiguous runs: chunks spanning whole trailing dims (one run per chunk), chunks larger than
// the array, and a middle dim split while the last is whole.
TEST(ZarrArray, ChunkLayoutsAgainstTheArrayAllReadTheSameValues) {
  TempDir dir;
  const std::vector<float> values = ramp(4 * 3 * 5);
  const std::vector<std::vector<int64_t>> layouts = {{4, 3, 5}, {1, 3, 5}, {3, 3, 5}, {2, 2, 5}, {3, 3, 7},
                                                     {8, 8, 8}, {1, 1, 1}, {4, 2, 4}, {5, 3, 5}};
  for (size_t i = 0; i < layouts.size(); ++i) {
    const std::string path = dir.file("l" + std::to_string(i));
    write_zarr_array(path, {4, 3, 5}, layouts[i], "<f4", values);
    EXPECT_EQ(ZarrArray(path).read_float32(), values) << "chunks " << testing::json_list(layouts[i]);
  }
}

TEST(ZarrArray, NestedSeparatorReadsChunksFromFolders) {
  TempDir dir;
  ZarrWriteOptions options;
  options.separator = "/";
  const std::vector<float> values = ramp(5 * 4);
  write_zarr_array(dir.file("n"), {5, 4}, {2, 3}, "<f4", values, options);
  ASSERT_TRUE(std::filesystem::is_regular_file(dir.file("n/2/1")));
  const ZarrArray array(dir.file("n"));
  EXPECT_EQ(array.chunk_path({2, 1}), dir.file("n") + "/2/1");
  EXPECT_EQ(array.read_float32(), values);
}

TEST(ZarrArray, MissingChunksReadAsTheFillValue) {
  TempDir dir;
  ZarrWriteOptions options;
  options.fill_value = "7.5";
  options.skip_chunks = {"1.0"};
  const std::vector<float> values = ramp(5 * 2);
  write_zarr_array(dir.file("f"), {5, 2}, {2, 2}, "<f4", values, options);
  std::vector<float> expected = values;
  for (size_t i = 4; i < 8; ++i) expected[i] = 7.5f;  // rows 2 and 3
  EXPECT_EQ(ZarrArray(dir.file("f")).read_float32(), expected);

  options.fill_value = "\"NaN\"";
  write_zarr_array(dir.file("g"), {5, 2}, {2, 2}, "<f4", values, options);
  const auto with_nan = ZarrArray(dir.file("g")).read_float32();
  EXPECT_TRUE(std::isnan(with_nan[4]));
  EXPECT_EQ(with_nan[3], values[3]);

  options.fill_value = "-4";
  options.skip_chunks = {"0"};
  write_zarr_array(dir.file("i"), {3}, {2}, "<i8", std::vector<int64_t>{10, 20, 30}, options);
  EXPECT_EQ(ZarrArray(dir.file("i")).read_int64(), (std::vector<int64_t>{-4, -4, 30}));

  options.fill_value = "null";  // no fill value: zeros
  write_zarr_array(dir.file("z"), {3}, {2}, "<i4", std::vector<int32_t>{1, 2, 3}, options);
  EXPECT_EQ(ZarrArray(dir.file("z")).read_int64(), (std::vector<int64_t>{0, 0, 3}));
}

TEST(ZarrArray, EveryDtypeConvertsToTheRequestedType) {
  TempDir dir;
  write_zarr_array(dir.file("f8"), {3}, {2}, "<f8", std::vector<double>{0.25, -1.5, 1e10});
  EXPECT_EQ(ZarrArray(dir.file("f8")).read_float32(), (std::vector<float>{0.25f, -1.5f, 1e10f}));
  write_zarr_array(dir.file("i8"), {3}, {2}, "<i8", std::vector<int64_t>{int64_t{1} << 40, -2, 3});
  EXPECT_EQ(ZarrArray(dir.file("i8")).read_int64(), (std::vector<int64_t>{int64_t{1} << 40, -2, 3}));
  write_zarr_array(dir.file("i4"), {3}, {3}, "<i4", std::vector<int32_t>{-7, 0, 255});
  EXPECT_EQ(ZarrArray(dir.file("i4")).read_float32(), (std::vector<float>{-7, 0, 255}));
  EXPECT_THROW(ZarrArray(dir.file("i4")).read_uint8(), RuntimeError);  // -7
  write_zarr_array(dir.file("u1"), {2, 3}, {1, 2}, "|u1", std::vector<uint8_t>{0, 1, 2, 253, 254, 255});
  EXPECT_EQ(ZarrArray(dir.file("u1")).read_uint8(), (std::vector<uint8_t>{0, 1, 2, 253, 254, 255}));
  EXPECT_EQ(ZarrArray(dir.file("u1")).read_int64(), (std::vector<int64_t>{0, 1, 2, 253, 254, 255}));
}

TEST(ZarrArray, ConversionsRefuseValuesThatDoNotFit) {
  TempDir dir;
  write_zarr_array(dir.file("ok"), {4}, {4}, "<f4", std::vector<float>{0.0f, 254.6f, 255.0f, 17.0f});
  EXPECT_EQ(ZarrArray(dir.file("ok")).read_uint8(), (std::vector<uint8_t>{0, 255, 255, 17}));
  for (float bad : {256.0f, -1.0f, std::nanf("")}) {
    write_zarr_array(dir.file("bad"), {2}, {2}, "<f4", std::vector<float>{1.0f, bad});
    try {
      ZarrArray(dir.file("bad")).read_uint8();
      ADD_FAILURE() << bad << " was read as uint8";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("element 1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[0, 255]"), std::string::npos) << e.what();
    }
  }
  write_zarr_array(dir.file("frac"), {2}, {2}, "<f8", std::vector<double>{1.0, 2.5});
  EXPECT_THROW(ZarrArray(dir.file("frac")).read_int64(), RuntimeError);
}

TEST(ZarrArray, UnsupportedMetadataIsRefusedClearly) {
  TempDir dir;
  const auto error_with = [&](const std::string& dtype, const ZarrWriteOptions& options) {
    write_zarr_array(dir.file("m"), {2}, {2}, dtype, std::vector<float>{1, 2}, options);
    return open_error(dir.file("m"));
  };
  const auto contains = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  ZarrWriteOptions plain;
  EXPECT_TRUE(contains(error_with(">f4", plain), "big-endian dtype '>f4'"));
  EXPECT_TRUE(contains(error_with("|O", plain), "object dtype"));
  EXPECT_TRUE(contains(error_with("<c8", plain), "dtype '<c8' is not supported"));
  ZarrWriteOptions fortran;
  fortran.extra_json = ",\"order\": \"F\"";  // a later key wins in nlohmann's parse
  EXPECT_TRUE(contains(error_with("<f4", fortran), "only C order")) << error_with("<f4", fortran);
  ZarrWriteOptions filters;
  filters.extra_json = ",\"filters\": [{\"id\": \"delta\", \"dtype\": \"<f4\"}]";
  EXPECT_TRUE(contains(error_with("<f4", filters), "filters"));
  ZarrWriteOptions separator;
  separator.separator = "_";
  EXPECT_TRUE(contains(error_with("<f4", separator), "dimension_separator"));
  ZarrWriteOptions fill;
  fill.fill_value = "\"zero\"";
  EXPECT_TRUE(contains(error_with("<f4", fill), "fill_value"));

  const auto error_for_zarray = [&](const std::string& json) {
    write_text(dir.file("j/.zarray"), json);
    return open_error(dir.file("j"));
  };
  const std::string base = R"("chunks": [2], "dtype": "<f4", "shape": [4], "order": "C", "filters": null, "fill_value": 0)";
  EXPECT_TRUE(contains(error_for_zarray("{" + base + R"(, "zarr_format": 3})"), "only zarr v2"));
  EXPECT_TRUE(contains(error_for_zarray("{" + base + R"(, "zarr_format": 2, "compressor": {"id": "lzma"}})"),
                       "compressor 'lzma' is not supported"));
  EXPECT_TRUE(contains(error_for_zarray("{" + base + R"(, "zarr_format": 2, "compressor": {"cname": "lz4"}})"),
                       "\"compressor\""));
  EXPECT_TRUE(contains(error_for_zarray("{not json"), "not a JSON object"));
  EXPECT_TRUE(contains(error_for_zarray(R"({"zarr_format": 2, "chunks": [2, 2], "shape": [4], "dtype": "<f4"})"),
                       "\"chunks\" has 2 dimensions"));
  EXPECT_TRUE(contains(error_for_zarray(R"({"zarr_format": 2, "chunks": [0], "shape": [4], "dtype": "<f4"})"),
                       "\"chunks\" holds 0"));
  EXPECT_TRUE(contains(error_for_zarray(R"({"zarr_format": 2, "chunks": [1], "shape": [-4], "dtype": "<f4"})"),
                       "\"shape\" holds -4"));
  EXPECT_TRUE(contains(error_for_zarray(R"({"zarr_format": 2, "chunks": [1], "shape": [], "dtype": "<f4"})"),
                       "0-d"));
  // Absurd sizes: the element count and the chunk size are bounded before anything is allocated.
  EXPECT_TRUE(contains(error_for_zarray(R"({"zarr_format": 2, "chunks": [1, 1, 1],
                                           "shape": [1048576, 1048576, 1048576], "dtype": "<f4"})"),
                       "more than 2^40 elements"));
  EXPECT_TRUE(contains(error_for_zarray(R"({"zarr_format": 2, "chunks": [65536, 65536], "shape": [4, 4],
                                           "dtype": "<f4"})"),
                       "more than 1 GiB"));
  EXPECT_TRUE(contains(open_error(dir.file("nowhere")), "no .zarray"));
}

TEST(ZarrArray, CorruptChunksAreRefusedNamingTheChunk) {
  TempDir dir;
  const std::vector<float> values = ramp(8);
  const auto corrupt_chunk = [&](const std::string& compressor, auto edit) {
    ZarrWriteOptions options;
    options.compressor = compressor;
    const std::string path = dir.file(compressor);
    write_zarr_array(path, {8}, {4}, "<f4", values, options);
    auto bytes = testing::read_all_bytes(path + "/1");
    edit(bytes);
    testing::write_all_bytes(path + "/1", bytes);
    return open_error(path);
  };
  const auto truncate = [](std::vector<uint8_t>& b) { b.resize(b.size() - 3); };
  const auto garbage = [](std::vector<uint8_t>& b) { std::fill(b.begin(), b.end(), 0x5A); };
  const auto grow = [](std::vector<uint8_t>& b) { b.resize(b.size() + 4096, 0); };
  for (const char* compressor : {"none", "blosc", "zlib", "gzip"}) {
    std::vector<std::string> errors = {corrupt_chunk(compressor, truncate), corrupt_chunk(compressor, grow)};
    // Uncompressed bytes have no structure: any content of the right size is data.
    if (std::string(compressor) != "none") errors.push_back(corrupt_chunk(compressor, garbage));
    for (const std::string& error : errors)
      EXPECT_NE(error.find(dir.file(compressor) + "/1"), std::string::npos) << compressor << ": " << error;
  }
  // A valid Blosc buffer of the wrong size (another array's chunk) is caught by its header.
  ZarrWriteOptions options;
  write_zarr_array(dir.file("small"), {8}, {2}, "<f4", values, options);
  write_zarr_array(dir.file("big"), {8}, {4}, "<f4", values, options);
  std::filesystem::copy_file(dir.file("small/0"), dir.file("big/0"), std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(open_error(dir.file("big")).find("decompresses to 8 bytes, expected 16"), std::string::npos)
      << open_error(dir.file("big"));
  // A folder where a chunk file should be.
  std::filesystem::remove(dir.file("small/1"));
  std::filesystem::create_directory(dir.file("small/1"));
  EXPECT_NE(open_error(dir.file("small")).find(dir.file("small/1") + " is not a regular file"), std::string::npos)
      << open_error(dir.file("small"));
}

}  // namespace
}  // namespace sparsevit::episodes
