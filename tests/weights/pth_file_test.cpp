// torch.save files made by PyTorch itself (tests/weights/make_weight_fixtures.py): state dicts,
// MAE's layout, shared-storage views, every dtype, parameters; and the files that must be refused
// without running anything (argparse.Namespace, an object whose __reduce__ calls os.system).
#include "weights/pth_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/errors.h"
#include "weights/weight_file.h"

namespace sparsevit::weights {
namespace {

const std::string kFixtures = std::string(SPARSEVIT_SOURCE_DIR) + "/tests/weights/fixtures/";

nlohmann::json expected() {
  std::ifstream in(kFixtures + "expected.json");
  return nlohmann::json::parse(in);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every tensor of `file` as the fixture script recorded it (shape, dtype, exact values).
void expect_fixture_values(const train::NamedTensors& tensors, const std::string& file) {
  const nlohmann::json want = expected().at(file);
  ASSERT_EQ(tensors.size(), want.size()) << file;
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(file + ": " + name);
    ASSERT_TRUE(want.contains(name));
    const auto& w = want[name];
    EXPECT_EQ(t.sizes().vec(), w["shape"].get<std::vector<int64_t>>());
    const at::Tensor flat = t.to(at::kDouble).flatten().contiguous();
    const auto values = w["values"].get<std::vector<double>>();
    ASSERT_EQ(flat.numel(), static_cast<int64_t>(values.size()));
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(flat[static_cast<int64_t>(i)].item<double>(), values[i]);
  }
}

TEST(PthFile, StateDictWithMetadataAndMaeLayout) {
  expect_fixture_values(state_dict_from_pth(read_pth(kFixtures + "state_dict.pth"), "x"), "state_dict.pth");
  const c10::IValue mae = read_pth(kFixtures + "mae_layout.pth");
  ASSERT_TRUE(mae.isGenericDict());
  EXPECT_EQ(mae.toGenericDict().at("epoch").toInt(), 3);
  EXPECT_EQ(mae.toGenericDict().at("note").toStringRef(), "mae");
  expect_fixture_values(state_dict_from_pth(mae, "x"), "mae_layout.pth");
  expect_fixture_values(read_weight_file(kFixtures + "mae_layout.pth"), "mae_layout.pth");
}

TEST(PthFile, ViewsDtypesParametersAndScalars) {
  const train::NamedTensors t = state_dict_from_pth(read_pth(kFixtures + "mixed.pth"), "x");
  expect_fixture_values(t, "mixed.pth");
  EXPECT_EQ(t[3].second.scalar_type(), at::kHalf);
  EXPECT_EQ(t[4].second.scalar_type(), at::kBFloat16);
  EXPECT_EQ(t[6].second.scalar_type(), at::kBool);
  EXPECT_TRUE(t[0].second.is_contiguous()) << "views come back as their own contiguous tensors";
}

TEST(PthFile, ObjectsAreRefusedAndNothingRuns) {
  std::filesystem::remove("/tmp/sparsevit_pwned");
  for (const auto& [file, name] : std::vector<std::pair<std::string, std::string>>{
           {"namespace.pth", "argparse.Namespace"}, {"evil.pth", "posix.system"}}) {
    try {
      read_pth(kFixtures + file);
      ADD_FAILURE() << file << " was accepted";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("refuses to load '" + name + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/sparsevit_pwned"));
  try {
    state_dict_from_pth(read_pth(kFixtures + "no_tensors.pth"), "no_tensors.pth");
    ADD_FAILURE();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("top-level keys: epoch, lr"), std::string::npos) << e.what();
  }
}

TEST(PthFile, WritesWhatItReads) {
  const std::string path = ::testing::TempDir() + "/roundtrip.pth";
  const train::NamedTensors in = {{"a.weight", torch::randn({3, 4})},
                                  {"b", torch::arange(5, at::kLong)},
                                  {"c", torch::randn({4, 3}).t()}};  // non-contiguous
  write_pth(path, in);
  const train::NamedTensors out = read_weight_file(path);
  ASSERT_EQ(out.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_TRUE(out[i].second.equal(in[i].second)) << in[i].first;
  }
}

TEST(PthFile, CorruptArchivesAreErrorsNamingTheFile) {
  const std::string good = slurp(kFixtures + "mixed.pth");
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{100}, good.size() / 2, good.size() - 30, good.size() - 1}) {
    SCOPED_TRACE(cut);
    EXPECT_THROW(parse_pth(std::string_view(good).substr(0, cut), "cut.pth"), RuntimeError);
  }
  // Flipped bytes anywhere: an error or (in data bytes) other values, never a crash.
  for (std::size_t at = 0; at < good.size(); at += 97) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    try {
      parse_pth(bad, "flipped.pth");
    } catch (const RuntimeError&) {
    }
  }
  try {
    parse_pth("\x80\x02garbage", "old.pth");
    ADD_FAILURE();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("legacy torch.save format"), std::string::npos);
  }
}

}  // namespace
}  // namespace sparsevit::weights
