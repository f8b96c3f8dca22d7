// The checkpoint container alone (weights/checkpoint_file): record, tensors, named sections and
// buffers read back as written; absent sections say so; the header's checksum refuses a changed
// byte. train/checkpoint (tests/train) fills it with a run's whole state.
#include "weights/checkpoint_file.h"

#include <filesystem>

#include <torch/nn/modules/linear.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "weights_test_support.h"

namespace sparsevit::weights {
namespace {

class CheckpointFiles : public testing::ScratchDir {};

TEST_F(CheckpointFiles, ReadsBackRecordTensorsSectionsAndBuffers) {
  torch::nn::Linear linear(3, 2);
  const CheckpointRecord record{4, 123, "rng text", R"({"model": "x"})"};
  const at::Tensor counter = at::arange(5, at::kLong);
  write_checkpoint_file(path("a.pt"), record, named_state(*linear),
                        {{"extra", [&](torch::serialize::OutputArchive& a) { a.write("counter", counter, true); }}},
                        {{"generator", at::full({3}, 7, at::kByte)}});
  const CheckpointFile file(path("a.pt"));
  EXPECT_EQ(file.epoch(), 4);
  EXPECT_EQ(file.global_step(), 123);
  EXPECT_EQ(file.host_rng_state(), "rng text");
  EXPECT_EQ(file.metadata_json(), R"({"model": "x"})");
  ASSERT_EQ(file.model_tensors().size(), 2u);
  EXPECT_EQ(file.model_tensors()[0].first, "weight");
  EXPECT_TRUE(at::equal(file.model_tensors()[0].second, linear->weight));
  EXPECT_TRUE(file.has_section("extra"));
  EXPECT_FALSE(file.has_section("optimizer"));
  torch::serialize::InputArchive extra;
  file.read_section("extra", extra);
  at::Tensor read;
  extra.read("counter", read, true);
  EXPECT_TRUE(at::equal(read, counter));
  EXPECT_TRUE(at::equal(file.buffer("generator"), at::full({3}, 7, at::kByte)));
  EXPECT_FALSE(file.buffer("absent").defined());
  torch::serialize::InputArchive none;
  EXPECT_RUNTIME_ERROR_WITH(file.read_section("optimizer", none), "checkpoint " + path("a.pt"), "holds no optimizer state");
}

TEST_F(CheckpointFiles, RefusesBadMetadataAndChangedBytes) {
  torch::nn::Linear linear(3, 2);
  EXPECT_THROW(write_checkpoint_file(path("bad.pt"), {0, 0, "", "{not json"}, named_state(*linear)), UsageError);
  EXPECT_FALSE(std::filesystem::exists(path("bad.pt")));
  write_checkpoint_file(path("ok.pt"), {}, named_state(*linear));
  std::string bytes = testing::file_bytes(path("ok.pt"));
  bytes[bytes.size() / 2] ^= 0x01;
  testing::write_bytes(path("flipped.pt"), bytes);
  EXPECT_RUNTIME_ERROR_WITH(CheckpointFile(path("flipped.pt")), "checkpoint " + path("flipped.pt"), "checksum mismatch");
}

}  // namespace
}  // namespace sparsevit::weights
