// What sparsevit writes, read by PyTorch itself: torch.load on our .pth and a from-the-spec
// safetensors parser on our .safetensors, both in Debian's python3-torch (installed by
// scripts/test; the test is skipped where it is absent).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>

#include "weights/weight_file.h"

namespace sparsevit::weights {
namespace {

bool have_python_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

TEST(PythonInterop, TorchLoadAndSafetensorsReadWhatWeWrite) {
  if (!have_python_torch()) GTEST_SKIP() << "Debian's python3-torch is not installed";
  const std::string dir = ::testing::TempDir();
  const train::NamedTensors tensors = {{"blocks.0.attn.qkv.weight", torch::arange(12, at::kFloat).reshape({4, 3}) / 8},
                                       {"pos_embed", torch::arange(6, at::kFloat).reshape({1, 2, 3}).transpose(1, 2)},
                                       {"head.bias", torch::tensor({-1.5, 2.25}, at::kDouble)},
                                       {"steps", torch::tensor({7, -3}, at::kLong)}};
  write_weight_file(dir + "/w.pth", tensors, WeightFormat::pth);
  write_weight_file(dir + "/w.safetensors", tensors, WeightFormat::safetensors);
  const std::string script = dir + "/check.py";
  std::ofstream(script) << R"PY(
import json, struct, sys, torch
d = sys.argv[1]
sd = torch.load(d + "/w.pth")
assert list(sd) == ["blocks.0.attn.qkv.weight", "pos_embed", "head.bias", "steps"], list(sd)
assert torch.equal(sd["blocks.0.attn.qkv.weight"], torch.arange(12.).reshape(4, 3) / 8)
assert torch.equal(sd["pos_embed"], torch.arange(6.).reshape(1, 2, 3).transpose(1, 2))
assert sd["head.bias"].dtype == torch.float64 and sd["head.bias"].tolist() == [-1.5, 2.25]
assert sd["steps"].tolist() == [7, -3]
raw = open(d + "/w.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
assert header["__metadata__"]["format"] == "pt"
dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}
for name, want in sd.items():
    e = header[name]
    b, end = e["data_offsets"]
    got = torch.frombuffer(bytearray(raw[8 + n + b: 8 + n + end]), dtype=dtypes[e["dtype"]]).reshape(e["shape"])
    assert torch.equal(got, want), name
print("ok")
)PY";
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir).c_str()), 0);
}

}  // namespace
}  // namespace sparsevit::weights
