// safetensors: a file written from the format's definition in Python (make_weight_fixtures.py),
// round trips, and every malformed header a reader must refuse.
#include "weights/safetensors_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <sstream>

#include "util/errors.h"

namespace sparsevit::weights {
namespace {

const std::string kFixtures = std::string(SPARSEVIT_SOURCE_DIR) + "/tests/weights/fixtures/";

std::string file_with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}

void expect_refused(const std::string& bytes, const std::string& reason) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
    ADD_FAILURE() << "accepted; expected: " << reason;
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("bad.safetensors: ", 0), 0u) << e.what();
  }
}

TEST(Safetensors, ReadsAFileWrittenFromTheSpecInPython) {
  const SafetensorsContents c = read_safetensors(kFixtures + "tensors.safetensors");
  ASSERT_EQ(c.tensors.size(), 4u);
  EXPECT_EQ(c.tensors[0].first, "w");
  EXPECT_TRUE(c.tensors[0].second.equal(torch::arange(6, at::kFloat).reshape({2, 3}) / 4));
  EXPECT_EQ(c.tensors[1].second.scalar_type(), at::kHalf);
  EXPECT_EQ(c.tensors[1].second[1].item<float>(), -0.25f);
  EXPECT_EQ(c.tensors[2].second[0][1].item<int64_t>(), -6);
  EXPECT_EQ(c.tensors[3].second.scalar_type(), at::kBool);
  EXPECT_EQ(c.metadata.at("format"), "pt");
}

TEST(Safetensors, RoundTripKeepsOrderDtypesAndMetadata) {
  const std::string path = ::testing::TempDir() + "/w.safetensors";
  const train::NamedTensors in = {{"z", torch::randn({2, 3})},
                                  {"a", torch::randn({4}).to(at::kBFloat16)},
                                  {"n", torch::zeros({0, 3})},
                                  {"t", torch::randn({3, 2}).t()}};
  write_safetensors(path, in, {{"format", "pt"}});
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  const std::string bytes = s.str();
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header % 8, 0u) << "header padded to 8 bytes";
  const SafetensorsContents out = parse_safetensors(bytes, path);
  ASSERT_EQ(out.tensors.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out.tensors[i].first, in[i].first);
    EXPECT_TRUE(out.tensors[i].second.equal(in[i].second)) << in[i].first;
  }
  EXPECT_EQ(out.metadata.at("format"), "pt");
  EXPECT_THROW(write_safetensors(path, {{"x", torch::ones(1)}, {"x", torch::ones(1)}}), UsageError);
}

TEST(Safetensors, MalformedFilesAreRefusedWithTheReason) {
  const std::string f32x2(8, '\0');
  expect_refused("1234", "shorter than its 8-byte header length");
  expect_refused(file_with_header("{}", "").substr(0, 9), "runs past the end");
  expect_refused(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}", "over 100 MB");
  expect_refused(file_with_header("[1, 2]", ""), "not a JSON object");
  expect_refused(file_with_header("{\"a\": ", ""), "not a JSON object");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [2]}})", f32x2), "needs dtype, shape and data_offsets");
  expect_refused(file_with_header(R"({"a": {"dtype": "F8", "shape": [2], "data_offsets": [0, 8]}})", f32x2), "unsupported dtype 'F8'");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", f32x2), "non-size");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", f32x2), "8 bytes for 3 elements");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", f32x2), "outside the 8-byte data");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", f32x2), "outside");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", f32x2),
                 "shape too large");
  expect_refused(file_with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                                  R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", f32x2),
                 "overlap");
  expect_refused(file_with_header(R"({"__metadata__": {"k": 1}})", ""), "not a string");
}

}  // namespace
}  // namespace sparsevit::weights
