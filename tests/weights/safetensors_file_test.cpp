// safetensors: a file written by hand in Python reads back exactly; our writer round-trips every
// dtype; every kind of damage is a one-line RuntimeError naming the source, never a crash.
#include "weights/safetensors_file.h"

#include <cstring>

#include "weights_test_support.h"

namespace sparsevit::weights {
namespace {

using testing::expect_matches_fixture;
using testing::fixture;

std::string make_file(const std::string& header, const std::string& data = "") {
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + data;
}

TEST(Safetensors, ReadsTheFileWrittenByHandInPython) {
  const SafetensorsContents contents = read_safetensors(fixture("hand.safetensors"));
  expect_matches_fixture(contents.tensors, "hand.expected.json");
  EXPECT_EQ(contents.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"source", "hand"}}));
}

class SafetensorsFiles : public testing::ScratchDir {};

TEST_F(SafetensorsFiles, RoundTripEveryDtypeWithMetadata) {
  const weights::NamedTensors tensors = testing::every_dtype();
  write_safetensors(path("w.safetensors"), tensors, {{"k", "v"}});
  const std::string bytes = testing::file_bytes(path("w.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  const SafetensorsContents back = read_safetensors(path("w.safetensors"));
  testing::expect_same(back.tensors, tensors);
  EXPECT_EQ(back.metadata.at("k"), "v");
}

TEST_F(SafetensorsFiles, WriterRefusesWhatItCannotRepresent) {
  EXPECT_THROW(write_safetensors(path("a"), {{"x", at::ones({1})}, {"x", at::ones({1})}}), UsageError);
  EXPECT_THROW(write_safetensors(path("a"), {{"x", at::ones({1}, at::kComplexFloat)}}), UsageError);
  EXPECT_THROW(write_safetensors(path("a"), {{"__metadata__", at::ones({1})}}), UsageError);
  EXPECT_THROW(write_safetensors(path("a"), {{"x", at::Tensor()}}), UsageError);
  EXPECT_FALSE(std::filesystem::exists(path("a")));
}

TEST(Safetensors, MissingFileIsAClearError) {
  EXPECT_RUNTIME_ERROR_WITH(read_safetensors("/nonexistent/w.safetensors"), "/nonexistent/w.safetensors", "cannot open");
}

TEST(Safetensors, TruncatedAtEveryCutPointIsAnErrorNotACrash) {
  const std::string bytes = testing::file_bytes(fixture("hand.safetensors"));
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(parse_safetensors(std::string_view(bytes).substr(0, cut), "cut.safetensors"), RuntimeError) << cut;
  EXPECT_RUNTIME_ERROR_WITH(parse_safetensors(bytes.substr(0, 5), "f"), "f", "shorter than the 8-byte");
  EXPECT_RUNTIME_ERROR_WITH(parse_safetensors(bytes.substr(0, 20), "f"), "f", "runs past the end");
  EXPECT_RUNTIME_ERROR_WITH(parse_safetensors(bytes.substr(0, bytes.size() - 1), "f"), "f", "run past the");
}

TEST(Safetensors, DamagedHeadersAreOneLineErrorsNamingTheProblem) {
  const auto bad = [](const std::string& header, const std::string& data, const std::string& fragment) {
    EXPECT_RUNTIME_ERROR_WITH(parse_safetensors(make_file(header, data), "bad.safetensors"), "bad.safetensors",
                              fragment);
  };
  const std::string four(16, '\0');
  bad("[1, 2]", "", "not a JSON object");
  bad("{\"a\": ", "", "not valid JSON");
  bad(R"({"a": {"dtype": "F32", "shape": [4]}})", four, "no \"data_offsets\"");
  bad(R"({"a": {"dtype": "F31", "shape": [4], "data_offsets": [0, 16]}})", four, "unsupported dtype 'F31'");
  bad(R"({"a": {"dtype": 3, "shape": [4], "data_offsets": [0, 16]}})", four, "\"dtype\" is not a string");
  bad(R"({"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", four, "negative dimension");
  bad(R"({"a": {"dtype": "F32", "shape": [4.5], "data_offsets": [0, 16]}})", four, "non-integer");
  bad(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 16]}})", four, "overflows");
  bad(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904, 0], "data_offsets": [0, 0]}})", "",
      "overflows");  // zero elements, but LibTorch would still multiply the other dimensions
  bad(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})", four, "end before begin");
  bad(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", four, "shape and dtype need 12");
  bad(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [4, 20]}})", four, "run past the 16-byte data buffer");
  bad(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
      four, "overlap");
  bad(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
      four, "appears twice");
  bad(R"({"__metadata__": {"a": 1}})", "", "is not a string");
  bad(R"({"a": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})", std::string("\x01\x02", 2), "other than 0 or 1");
  bad(std::string(100, '[') + std::string(100, ']'), "", "nests too deep");
  std::string huge(8, '\0');
  huge[5] = 0x10;  // 2^44
  EXPECT_RUNTIME_ERROR_WITH(parse_safetensors(huge + "{}", "h"), "h", "exceeds the 100 MB limit");
}

TEST(Safetensors, TensorsComeBackInDataOrderOwningTheirMemory) {
  std::string data(8, '\0');
  const float a = 1.5f, b = -2.0f;
  std::memcpy(data.data(), &b, 4);
  std::memcpy(data.data() + 4, &a, 4);
  std::string bytes = make_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}, "b": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})", data);
  const SafetensorsContents c = parse_safetensors(bytes, "x");
  bytes.assign(bytes.size(), '\0');  // the tensors are copies
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].first, "b");
  EXPECT_EQ(c.tensors[0].second.item<float>(), -2.0f);
  EXPECT_EQ(c.tensors[1].first, "a");
  EXPECT_EQ(c.tensors[1].second.item<float>(), 1.5f);
}

}  // namespace
}  // namespace sparsevit::weights
