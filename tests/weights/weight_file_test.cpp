// One entry point: formats told apart by magic bytes, read_weight_file for all three, the
// writer's format names.
#include "weights/weight_file.h"

#include <torch/nn/modules/linear.h>

#include "weights/checkpoint_file.h"
#include "weights_test_support.h"

namespace sparsevit::weights {
namespace {

using testing::fixture;

class WeightFiles : public testing::ScratchDir {};

TEST_F(WeightFiles, DetectsEachFormatByItsBytesNotItsName) {
  EXPECT_EQ(detect_weight_format(fixture("hand.safetensors")), WeightFormat::safetensors);
  EXPECT_EQ(detect_weight_format(fixture("state_dict.pth")), WeightFormat::pth);
  torch::nn::Linear linear(2, 3);
  write_checkpoint_file(path("ck.weights"), {}, named_state(*linear));
  EXPECT_EQ(detect_weight_format(path("ck.weights")), WeightFormat::checkpoint);
  const weights::NamedTensors from_checkpoint = read_weight_file(path("ck.weights"));
  ASSERT_EQ(from_checkpoint.size(), 2u);
  EXPECT_TRUE(at::equal(from_checkpoint[0].second, linear->weight));

  testing::write_bytes(path("junk.bin"), "hello, this is not a weight file");
  EXPECT_RUNTIME_ERROR_WITH(detect_weight_format(path("junk.bin")), path("junk.bin"),
                            "neither safetensors, a torch.save zip (.pth) nor a sparsevit checkpoint");
  testing::write_bytes(path("empty.bin"), "");
  EXPECT_THROW(detect_weight_format(path("empty.bin")), RuntimeError);
  EXPECT_RUNTIME_ERROR_WITH(detect_weight_format(fixture("legacy.pth")), fixture("legacy.pth"), "legacy torch.save");
  EXPECT_RUNTIME_ERROR_WITH(read_weight_file(path("missing")), path("missing"), "cannot open");
}

TEST_F(WeightFiles, ReadsAndWritesBothPublishedFormats) {
  testing::expect_matches_fixture(read_weight_file(fixture("mae_checkpoint.pth")), "mae_checkpoint.expected.json");
  testing::expect_matches_fixture(read_weight_file(fixture("hand.safetensors")), "hand.expected.json");
  const weights::NamedTensors tensors = testing::every_dtype();
  for (const char* name : {"safetensors", "pth", "PTH"}) {
    const std::string file = path(std::string("w.") + name);
    write_weight_file(file, tensors, parse_weight_format_name(name));
    testing::expect_same(read_weight_file(file), tensors);
  }
  EXPECT_THROW(parse_weight_format_name("onnx"), UsageError);
  EXPECT_THROW(write_weight_file(path("c"), tensors, WeightFormat::checkpoint), UsageError);
}

}  // namespace
}  // namespace sparsevit::weights
