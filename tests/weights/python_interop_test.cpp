// Python reads what we write: torch.load our write_pth output (plain, and with weights_only=True as
// torch 2.6 does by default and timm's load_checkpoint asks), and an independent safetensors
// parser (tests/weights/make_weight_fixtures.py) our write_safetensors output, value for value.
// Skipped only where Debian's /usr/bin/python3 with torch is not installed.
#include <cstdlib>
#include <filesystem>

#include "weights/pth_file.h"
#include "weights/safetensors_file.h"
#include "weights_test_support.h"

namespace sparsevit::weights {
namespace {

class PythonReads : public testing::ScratchDir {};

TEST_F(PythonReads, OurPthAndSafetensorsFiles) {
  if (!std::filesystem::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with torch is not installed";
  weights::NamedTensors tensors = testing::every_dtype();
  tensors.emplace_back("blocks.0.attn.qkv.weight", at::arange(24, at::kFloat).reshape({4, 6}) / 8);
  write_pth(path("ours.pth"), tensors);
  write_safetensors(path("ours.safetensors"), tensors);

  nlohmann::json expected = nlohmann::json::array();
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor flat = tensor.contiguous().reshape(-1);
    nlohmann::json values = nlohmann::json::array();
    for (int64_t k = 0; k < flat.numel(); ++k) {
      if (tensor.scalar_type() == at::kBool) values.push_back(flat[k].item<bool>());
      else if (at::isIntegralType(tensor.scalar_type(), false)) values.push_back(flat[k].item<int64_t>());
      else values.push_back(flat[k].item<double>());
    }
    const char* dtype = nullptr;
    switch (tensor.scalar_type()) {
      case at::kDouble: dtype = "F64"; break;
      case at::kFloat: dtype = "F32"; break;
      case at::kHalf: dtype = "F16"; break;
      case at::kBFloat16: dtype = "BF16"; break;
      case at::kLong: dtype = "I64"; break;
      case at::kInt: dtype = "I32"; break;
      case at::kShort: dtype = "I16"; break;
      case at::kChar: dtype = "I8"; break;
      case at::kByte: dtype = "U8"; break;
      default: dtype = "BOOL"; break;
    }
    expected.push_back({name, dtype, tensor.sizes().vec(), values});
  }
  testing::write_bytes(path("expected.json"), expected.dump());
  const std::string command = "/usr/bin/python3 " + std::string(SPARSEVIT_SOURCE_DIR) +
                              "/tests/weights/make_weight_fixtures.py --check-written " + path("ours.pth") + " " +
                              path("ours.safetensors") + " " + path("expected.json");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
}  // namespace sparsevit::weights
