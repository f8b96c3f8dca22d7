// End-to-end tests of the `sparsevit` binary, run as a user would: the `masks` and `flops`
// numbers the project promises (docs/conventions.md), the JSON schema,
// option spellings, PNG output and exit codes (0 ok, 2 usage/config error with one line on
// stderr, 1 runtime error).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/synthetic_idx.h"
#include "util/npz_file.h"

namespace {

namespace fs = std::filesystem;

using namespace sparsevit::testing;

nlohmann::json parse_json(const Result& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON object: " << e.what() << "\n" << r.describe();
    return nlohmann::json::object();
  }
}

std::string cfg(const std::string& name) { return "configs/attention/" + name; }

void expect_schema(const nlohmann::json& j, int tokens, int heads, int layers) {
  for (const char* key : {"tokens", "heads", "layers", "pruning_ratio", "density", "attention_gflops", "layers_detail"})
    ASSERT_TRUE(j.contains(key)) << key << " missing in " << j.dump().substr(0, 500);
  EXPECT_EQ(j["tokens"].get<int>(), tokens);
  EXPECT_EQ(j["heads"].get<int>(), heads);
  EXPECT_EQ(j["layers"].get<int>(), layers);
  for (const char* key : {"pruning_ratio", "density"}) {
    ASSERT_TRUE(j[key].is_number()) << key;
    EXPECT_GE(j[key].get<double>(), 0.0) << key;
    EXPECT_LE(j[key].get<double>(), 1.0) << key;
  }
  ASSERT_TRUE(j["attention_gflops"].is_number());
  EXPECT_GT(j["attention_gflops"].get<double>(), 0.0);
  ASSERT_TRUE(j["layers_detail"].is_array());
  ASSERT_EQ(j["layers_detail"].size(), static_cast<std::size_t>(layers));
  for (const auto& layer : j["layers_detail"]) {
    ASSERT_TRUE(layer.contains("heads"));
    ASSERT_TRUE(layer["heads"].is_array());
    ASSERT_EQ(layer["heads"].size(), static_cast<std::size_t>(heads));
    for (const auto& head : layer["heads"]) {
      for (const char* key : {"edges", "offsets", "window"}) ASSERT_TRUE(head.contains(key)) << key;
      ASSERT_TRUE(head["edges"].is_number_integer());
      EXPECT_GE(head["edges"].get<int64_t>(), 0);
      EXPECT_LE(head["edges"].get<int64_t>(), static_cast<int64_t>(tokens) * tokens);
      ASSERT_TRUE(head["offsets"].is_null() || head["offsets"].is_array());
      if (head["offsets"].is_array()) {
        int64_t previous = -1;
        for (const auto& o : head["offsets"]) {
          ASSERT_TRUE(o.is_number_integer());
          EXPECT_GE(o.get<int64_t>(), 0);
          EXPECT_GT(o.get<int64_t>(), previous) << "offsets sorted and unique";
          previous = o.get<int64_t>();
        }
      }
      ASSERT_TRUE(head["window"].is_null() || head["window"].is_number_integer());
    }
  }
}

// A float32 .npy file shaped `shape` ('<f4', C order, format 1.0).
std::string npy(const std::vector<int64_t>& shape, const std::vector<float>& data) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t total = 10 + dict.size() + 1;
  dict += std::string((total + 63) / 64 * 64 - total, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  for (float v : data) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b) out += static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return out;
}

// =============================================================================================

TEST(Cli, BinaryExists) { ASSERT_TRUE(fs::exists(kBinary)) << kBinary; }

TEST(Cli, FibottentionPruningRatio) {
  const Result r = run("masks --json --attn-cfg " + cfg("vit_fibottention.yaml") + " --tokens 197 --heads 12 --layers 12");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  expect_schema(j, 197, 12, 12);
  EXPECT_NEAR(j["pruning_ratio"].get<double>(), 0.9801, 5e-5);
  // Diagonal heads report their offsets (positive: the main diagonal is excluded) and windows 5..65.
  std::vector<int64_t> windows;
  for (const auto& head : j["layers_detail"][0]["heads"]) {
    ASSERT_TRUE(head["offsets"].is_array());
    ASSERT_FALSE(head["offsets"].empty());
    EXPECT_GT(head["offsets"][0].get<int64_t>(), 0);
    windows.push_back(head["window"].get<int64_t>());
  }
  std::sort(windows.begin(), windows.end());
  EXPECT_EQ(windows.front(), 5);
  EXPECT_EQ(windows.back(), 65);
  // The patch-only GFLOPs the literature reports (~0.014) beside the all-pairs number.
  ASSERT_TRUE(j.contains("attention_gflops_patch"));
  EXPECT_NEAR(j["attention_gflops_patch"].get<double>(), 0.715 * (196.0 * 196 / (197.0 * 197)) * (1 - 0.9801), 0.0005);
  EXPECT_GT(j["attention_gflops"].get<double>(), j["attention_gflops_patch"].get<double>());
}

TEST(Cli, ModifiedFibottentionPruningRatio) {
  const Result r =
      run("masks --json --attn-cfg " + cfg("vit_fibottention_modified.yaml") + " --tokens 197 --heads 12 --layers 12");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  expect_schema(j, 197, 12, 12);
  EXPECT_NEAR(j["pruning_ratio"].get<double>(), 0.9622, 5e-5);
}

TEST(Cli, LocalWindowTenWithoutDiagonal) {
  const Result r = run("masks --json --attn-cfg " + cfg("vit_structured_local.yaml") +
                       " --set window=10 --tokens 197 --heads 12 --layers 12");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  expect_schema(j, 197, 12, 12);
  EXPECT_NEAR(j["pruning_ratio"].get<double>(), 0.9008, 5e-5);
  for (const auto& head : j["layers_detail"][3]["heads"]) {
    EXPECT_EQ(head["window"].get<int64_t>(), 10);
    std::vector<int64_t> expected;
    for (int o = 1; o <= 10; ++o) expected.push_back(o);
    EXPECT_EQ(head["offsets"].get<std::vector<int64_t>>(), expected);
    EXPECT_EQ(head["edges"].get<int64_t>(), 3810 + 2 * 197 - 1);
  }
}

TEST(Cli, EveryStaticConfigReportsAValidSchema) {
  // (Each run of the binary costs ~0.3 s of LibTorch start-up: the per-config details are in
  // the config and pattern suites; here a few configs cover the report paths.)
  for (const char* name : {"vit_longformer.yaml"}) {
    SCOPED_TRACE(name);
    const Result r = run(std::string("masks --json --attn-cfg ") + cfg(name) + " --tokens 65 --heads 4 --layers 12");
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto j = parse_json(r);
    expect_schema(j, 65, 4, 12);
  }
  const Result dense = run("masks --json --attn-cfg " + cfg("vit_dense.yaml") + " --tokens 197 --heads 12 --layers 12");
  ASSERT_EQ(dense.exit_code, 0) << dense.describe();
  const auto d = parse_json(dense);
  expect_schema(d, 197, 12, 12);
  EXPECT_DOUBLE_EQ(d["pruning_ratio"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(d["density"].get<double>(), 1.0);
  EXPECT_NEAR(d["attention_gflops"].get<double>(), 0.715, 0.001);
  const Result topk = run("masks --json --attn-cfg " + cfg("vit_topk.yaml") + " --tokens 197 --heads 12 --layers 12");
  ASSERT_EQ(topk.exit_code, 0) << topk.describe();
  const auto t = parse_json(topk);
  expect_schema(t, 197, 12, 12);
  EXPECT_NEAR(t["pruning_ratio"].get<double>(), 1.0 - 4.0 / 196, 1e-9);
  EXPECT_EQ(t.value("keys_per_query", 0), 4);
}

TEST(Cli, TableOutputWithTheDefaultConfig) {
  const Result r = run("masks");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("0.9801"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("layer 11"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("offsets"), std::string::npos) << r.describe();
}

TEST(Cli, FlopsDenseVitBase) {
  const Result r = run("flops --model vit_base_patch16_224 --attn-cfg " + cfg("vit_dense.yaml") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  for (const char* key : {"attention_gflops", "attention_gflops_patch", "pruning_ratio", "density"})
    ASSERT_TRUE(j.contains(key) && j[key].is_number()) << key << "\n" << r.describe();
  EXPECT_NEAR(j["attention_gflops"].get<double>(), 0.715, 0.001);
  // 12 layers x 12 heads x 2 x 64 x 197^2 / 1e9 exactly; the patch-only variant over 196^2.
  EXPECT_NEAR(j["attention_gflops"].get<double>(), 144.0 * 2 * 64 * 197 * 197 / 1e9, 1e-9);
  EXPECT_NEAR(j["attention_gflops_patch"].get<double>(), 144.0 * 2 * 64 * 196 * 196 / 1e9, 1e-9);
  EXPECT_DOUBLE_EQ(j["pruning_ratio"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["density"].get<double>(), 1.0);
  // Fibottention on ViT-B: the same pruning ratio as `masks`.
  const Result f = run("flops --model vit_base_patch16_224 --attn-cfg " + cfg("vit_fibottention.yaml") + " --json");
  ASSERT_EQ(f.exit_code, 0) << f.describe();
  EXPECT_NEAR(parse_json(f)["pruning_ratio"].get<double>(), 0.9801, 5e-5);
}

TEST(Cli, DashAndUnderscoreSpellings) {
  const Result dashed = run("masks --json --attn-cfg " + cfg("vit_structured_local.yaml") +
                            " --tokens 33 --heads 2 --layers 2 --head-dim 32");
  const Result underscored = run("masks --json --attn_cfg " + cfg("vit_structured_local.yaml") +
                                 " --tokens 33 --heads 2 --layers 2 --head_dim 32");
  ASSERT_EQ(dashed.exit_code, 0) << dashed.describe();
  ASSERT_EQ(underscored.exit_code, 0) << underscored.describe();
  const auto a = parse_json(dashed), b = parse_json(underscored);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.value("head_dim", 0), 32);
  // |j-k| <= 2 without the diagonal over 32 patches + the class row and column, 2 layers x 2 heads.
  const double edges = 2.0 * (31 + 30) + 2 * 33 - 1;
  EXPECT_NEAR(a["attention_gflops"].get<double>(), 4 * 2 * 32 * edges / 1e9, 1e-15);
}

TEST(Cli, ARepeatedOptionKeepsItsLastValue) {
  // As argparse does: scripts append overrides to their defaults (scripts/reproduce ... --seeds 0).
  const std::string base = "masks --json --attn-cfg " + cfg("vit_structured_local.yaml") + " --heads 2 --layers 2";
  const Result repeated = run(base + " --tokens 50 --tokens 33");
  const Result single = run(base + " --tokens 33");
  ASSERT_EQ(repeated.exit_code, 0) << repeated.describe();
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  EXPECT_EQ(parse_json(repeated), parse_json(single));
  EXPECT_NE(parse_json(repeated), parse_json(run(base + " --tokens 50")));
}

TEST(Cli, UsageErrorsExitTwoWithOneLine) {
  TempDir dir;
  expect_usage_error(run("frobnicate"));
  expect_usage_error(run("masks --bogus-option 3"));
  expect_usage_error(run("masks --tokens 0"));
  expect_usage_error(run("masks --attn-cfg " + quote((dir.path() / "missing.yaml").string())), "missing.yaml");
  const std::string bad_yaml = dir.file("bad.yaml", "attention:\n  backend: vit\n  mask: [fibo\n");
  expect_usage_error(run("masks --attn-cfg " + quote(bad_yaml)), "bad.yaml");
  const std::string unknown_mask = dir.file("unknown_mask.yaml", "attention:\n  backend: vit\n  mask: fibbo\n");
  const Result um = run("masks --attn-cfg " + quote(unknown_mask));
  expect_usage_error(um, "did you mean 'fibo'");
  EXPECT_NE(um.err.find("unknown_mask.yaml:3"), std::string::npos) << um.describe();
  const std::string bad_value = dir.file("bad_value.yaml", "attention:\n  mask: local\n  mask_kwargs:\n    window: -1\n");
  expect_usage_error(run("masks --attn-cfg " + quote(bad_value) + " --tokens 20 --heads 1 --layers 1"), "bad_value.yaml:4");
  expect_usage_error(run("masks --set windw=3 --attn-cfg " + cfg("vit_structured_local.yaml")), "did you mean 'window'");
  expect_usage_error(run("flops --model vit_bse_patch16_224"), "did you mean 'vit_base_patch16_224'");
  expect_usage_error(run("masks --attn-cfg " + cfg("vit_dense.yaml") + " --tokens 20 --heads 1 --layers 1 --png " +
                         quote((dir.path() / "d.png").string())));
}

TEST(Cli, PngIsWritten) {
  TempDir dir;
  const std::string png = (dir.path() / "heads.png").string();
  const Result r = run("masks --attn-cfg " + cfg("vit_fibottention.yaml") + " --tokens 65 --heads 4 --layers 2 --png " +
                       quote(png) + " --png-layer 1");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(fs::exists(png)) << r.describe();
  const std::string bytes = slurp(png);
  ASSERT_GE(bytes.size(), 8u + 25u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(bytes.substr(bytes.size() - 8, 4), "IEND");
  EXPECT_NE(r.out.find("heads.png"), std::string::npos) << r.describe();
  // An unwritable path is a runtime error.
  const Result bad = run("masks --attn-cfg " + cfg("vit_structured_local.yaml") + " --tokens 20 --heads 2 --layers 1 --png " +
                         quote((dir.path() / "no_such_dir" / "x.png").string()));
  EXPECT_EQ(bad.exit_code, 1) << bad.describe();
  EXPECT_EQ(bad.stderr_lines(), 1) << bad.describe();
}

TEST(Cli, PruningConfigWithMissingScoresFileIsARuntimeError) {
  TempDir dir;
  // The shipped config's relative scores_file does not exist in a fresh directory.
  const Result shipped = run("masks --attn-cfg " + quote(kSourceDir + "/" + cfg("vit_pruning.yaml")), dir.path().string());
  EXPECT_EQ(shipped.exit_code, 1) << shipped.describe();
  EXPECT_EQ(shipped.stderr_lines(), 1) << shipped.describe();
  EXPECT_NE(shipped.err.find("attention_scores.npy"), std::string::npos) << shipped.describe();
  const std::string missing = dir.file(
      "p.yaml", "attention:\n  mask: pruning\n  mask_kwargs:\n    scores_file: " + (dir.path() / "none.npy").string() + "\n");
  const Result r = run("masks --json --attn-cfg " + quote(missing));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.stderr_lines(), 1) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

TEST(Cli, FileMaskReportsTheSourcePatternsPruning) {
  // A local window |j - k| <= 1 over 17 tokens (no class token), written as CSR [H, N+1] /
  // [H, W] the way Python's np.savez would; `mask: file` must report what `mask: local` does.
  TempDir dir;
  const int n = 17, heads = 2;
  std::vector<int64_t> row_ptr, col_idx;
  for (int h = 0; h < heads; ++h) {
    row_ptr.push_back(0);
    int64_t edges = 0;
    for (int j = 0; j < n; ++j) {
      for (int k = std::max(0, j - 1); k <= std::min(n - 1, j + 1); ++k, ++edges) col_idx.push_back(k);
      row_ptr.push_back(edges);
    }
  }
  const std::string npz = (dir.path() / "local.npz").string();
  sparsevit::write_npz(npz,
                       {{"row_ptr", sparsevit::make_npy_array(sparsevit::NpyDtype::kInt64, {heads, n + 1}, row_ptr)},
                        {"col_idx", sparsevit::make_npy_array(sparsevit::NpyDtype::kInt32, {heads, 3 * n - 2}, col_idx)}},
                       true);
  const std::string file_yaml = dir.file("f.yaml", "attention:\n  mask: file\n  mask_kwargs:\n    pattern_file: " + npz + "\n");
  const std::string local_yaml = dir.file("l.yaml", "attention:\n  mask: local\n  mask_kwargs:\n    window: 1\n");
  const std::string geometry = " --tokens 17 --heads 2 --layers 3 --no-class-token";
  const Result file = run("masks --json --attn-cfg " + quote(file_yaml) + geometry);
  const Result local = run("masks --json --attn-cfg " + quote(local_yaml) + geometry);
  ASSERT_EQ(file.exit_code, 0) << file.describe();
  ASSERT_EQ(local.exit_code, 0) << local.describe();
  const auto f = parse_json(file), l = parse_json(local);
  expect_schema(f, 17, 2, 3);
  EXPECT_DOUBLE_EQ(f["pruning_ratio"].get<double>(), l["pruning_ratio"].get<double>());
  EXPECT_NEAR(f["pruning_ratio"].get<double>(), 1.0 - (3.0 * n - 2) / (n * n), 1e-12);
  // The file does not fit another model: a runtime error naming it, on one line.
  const Result wrong = run("masks --json --attn-cfg " + quote(file_yaml) + " --tokens 18 --heads 2 --layers 3 --no-class-token");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.describe();
  EXPECT_EQ(wrong.stderr_lines(), 1) << wrong.describe();
  EXPECT_NE(wrong.err.find("local.npz"), std::string::npos) << wrong.describe();
  EXPECT_NE(wrong.err.find("N=18"), std::string::npos) << wrong.describe();
}

TEST(Cli, PruningConfigWithScoresFile) {
  TempDir dir;
  const int heads = 2, n = 17;
  std::vector<float> data(static_cast<std::size_t>(heads) * n * n);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i * 7919) % 1009) / 1009.0f;
  const std::string scores = dir.file("s.npy", npy({heads, n, n}, data));
  const std::string yaml = dir.file(
      "p.yaml", "attention:\n  mask: pruning\n  mask_kwargs:\n    pruning_ratio: 0.5\n    scores_file: " + scores + "\n");
  const Result r = run("masks --json --attn-cfg " + quote(yaml) + " --tokens 17 --heads 2 --layers 3");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  expect_schema(j, 17, 2, 3);
  EXPECT_NEAR(j["pruning_ratio"].get<double>(), 0.5, 1e-12);
  // A shape that does not match the model: runtime error.
  const Result wrong = run("masks --json --attn-cfg " + quote(yaml) + " --tokens 18 --heads 2 --layers 3");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.describe();
  EXPECT_EQ(wrong.stderr_lines(), 1) << wrong.describe();
}

TEST(Cli, HelpAndList) {
  const Result help = run("--help");
  EXPECT_EQ(help.exit_code, 0) << help.describe();
  EXPECT_NE(help.out.find("masks"), std::string::npos) << help.describe();
  EXPECT_NE(help.out.find("flops"), std::string::npos) << help.describe();
  const Result list = run("masks --list");
  ASSERT_EQ(list.exit_code, 0) << list.describe();
  for (const char* name : {"fibo", "local", "random", "sparse_transformer", "bigbird", "longformer", "pruning", "file", "topk"}) {
    bool found = false;
    std::istringstream lines(list.out);
    for (std::string line; std::getline(lines, line);)
      found = found || line.rfind(std::string(name) + ":", 0) == 0 || line.rfind(std::string(name) + " ", 0) == 0;
    EXPECT_TRUE(found) << name << "\n" << list.describe();
  }
  EXPECT_NE(list.out.find("w_min"), std::string::npos);
  EXPECT_NE(list.out.find("keys_per_query"), std::string::npos);
}

TEST(Cli, WarningsGoToStderrAndJsonStaysClean) {
  // A window larger than the sequence is clamped with a warning.
  const Result r = run("masks --json --attn-cfg " + cfg("vit_structured_local.yaml") +
                       " --set window=1000 --tokens 17 --heads 2 --layers 1");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  expect_schema(j, 17, 2, 1);
  EXPECT_DOUBLE_EQ(j["pruning_ratio"].get<double>(), 1.0 / 16);  // only the main diagonal is missing
  EXPECT_NE(r.err.find("clamped"), std::string::npos) << r.describe();
}

TEST(Cli, NoClassToken) {
  const Result r = run("masks --json --attn-cfg " + cfg("vit_structured_local.yaml") +
                       " --no-class-token --tokens 196 --heads 1 --layers 1");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = parse_json(r);
  // Without a class token every token is a patch: the ratio of |j-k| <= 2 without diagonal over 196 tokens.
  EXPECT_NEAR(j["pruning_ratio"].get<double>(), 1.0 - 778.0 / 38416.0, 1e-12);
  EXPECT_EQ(j["layers_detail"][0]["heads"][0]["edges"].get<int64_t>(), 778);
}

// ---- finetune / eval, end to end on a tiny dataset written here ----

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

TEST(Cli, FinetuneWithAnExperimentConfigAndOverrides) {
  TempDir dir;
  fs::create_directories(dir.path() / "data");
  sparsevit::testing::write_synthetic_idx(dir.path() / "data", "train", 64, 1);
  sparsevit::testing::write_synthetic_idx(dir.path() / "data", "t10k", 32, 2);
  const std::string out = (dir.path() / "run").string();
  const std::string exp = dir.file("exp.yaml",
                                   "dataset: mnist\n"
                                   "data_path: " + (dir.path() / "data").string() + "\n"
                                   "model: vit_nano_patch2_28\n"
                                   "epochs: 3\n"
                                   "batch_size: 32\n"
                                   "attn_set: [w_max=33]\n"
                                   "threads: 2\n");
  // The command line overrides the file (epochs 3 -> 1) and takes the dash spelling.
  const Result r = run("finetune --config " + quote(exp) + " --epochs 1 --batch-size 16 --output_dir " + quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto summary = nlohmann::json::parse(last_line(r.out));
  for (const char* key : {"test_acc1", "attention_gflops", "pruning_ratio", "density", "params"})
    EXPECT_TRUE(summary.contains(key)) << key;
  EXPECT_EQ(summary["epochs"].get<int>(), 1);
  const auto config = nlohmann::json::parse(slurp(out + "/config.json"));
  EXPECT_EQ(config["batch_size"].get<int>(), 16);
  EXPECT_EQ(config["attn_set"][0].get<std::string>(), "w_max=33");
  EXPECT_TRUE(fs::exists(out + "/checkpoint.pt"));
  EXPECT_TRUE(fs::exists(out + "/metrics.jsonl"));

  const Result e = run("eval --resume " + quote(out + "/checkpoint.pt") + " --dataset mnist --data_path " +
                       quote((dir.path() / "data").string()));
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  EXPECT_EQ(nlohmann::json::parse(last_line(e.out))["test_acc1"], summary["test_acc1"]);
}

TEST(Cli, FinetuneInputErrors) {
  TempDir dir;
  const std::string bad_key = dir.file("exp.yaml", "epochs: 1\nbatch_sise: 3\n");
  expect_usage_error(run("finetune --config " + quote(bad_key)), "did you mean 'batch_size'");
  EXPECT_NE(run("finetune --config " + quote(bad_key)).err.find("exp.yaml:2"), std::string::npos);
  expect_usage_error(run("finetune --batch_size 0"), "batch_size");
  expect_usage_error(run("finetune --model vit_nano_patch3_28 --max_train_samples 8"), "did you mean");
  expect_usage_error(run("eval"), "--resume");
  // A truncated dataset file is a runtime error naming the file.
  fs::create_directories(dir.path() / "data");
  sparsevit::testing::write_synthetic_idx(dir.path() / "data", "train", 8, 1);
  sparsevit::testing::write_synthetic_idx(dir.path() / "data", "t10k", 8, 2);
  fs::resize_file(dir.path() / "data" / "t10k-images-idx3-ubyte", 1000);
  const Result r = run("finetune --dataset mnist --epochs 1 --threads 1 --data_path " + quote((dir.path() / "data").string()));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("t10k-images-idx3-ubyte"), std::string::npos) << r.describe();
}

TEST(Cli, SweepTakesAnExperimentConfigAndEveryRangeIsChecked) {
  TempDir dir;
  // sweep --config: the same YAML keys as its flags; a finetune-only key (seed is per run) is refused.
  const std::string exp = dir.file("sweep.yaml", "epochs: 1\nbatch_size: 0\n");
  expect_usage_error(run("sweep --configs " + quote(cfg("vit_dense.yaml")) + " --config " + quote(exp)),
                     "--batch_size must be > 0");
  const std::string per_run = dir.file("per_run.yaml", "seed: 3\n");
  expect_usage_error(run("sweep --configs " + quote(cfg("vit_dense.yaml")) + " --config " + quote(per_run)),
                     "unknown key 'seed'");
  // Budget matching: the plan names each config's knob and achieved pruning ratio at the model;
  // a bad target or a missing reference is a one-line usage error.
  const std::string out = (dir.path() / "plan").string();
  const Result plan = run("sweep --plan --model vit_nano_patch4_28 --output_dir " + quote(out) + " --configs " +
                          quote(cfg("vit_dense.yaml")) + " " + quote(cfg("vit_random.yaml")) + " --match_to " +
                          quote(cfg("vit_fibottention_small.yaml")));
  EXPECT_EQ(plan.exit_code, 0) << plan.describe();
  EXPECT_NE(plan.out.find("vit_random: "), std::string::npos) << plan.describe();
  EXPECT_NE(plan.out.find("(keys_per_query=4), pruning ratio 0.9184, 0/1 runs finished"), std::string::npos)
      << plan.describe();
  EXPECT_TRUE(fs::exists(fs::path(out) / "configs" / "vit_random.yaml"));
  EXPECT_FALSE(fs::exists(fs::path(out) / "report.md"));
  expect_usage_error(run("sweep --plan --model vit_nano_patch4_28 --output_dir " + quote(out) + " --configs " +
                         quote(cfg("vit_random.yaml")) + " --match_pruning_ratio 1.5"),
                     "--match-pruning-ratio: Value 1.5 not in range");
  expect_usage_error(run("sweep --plan --model vit_nano_patch4_28 --output_dir " + quote(out) + " --configs " +
                         quote(cfg("vit_random.yaml")) + " --match_to " + quote((dir.path() / "missing.yaml").string())),
                     "cannot read attention config");
  // Ranges come from the one field list: each form of message.
  expect_usage_error(run("finetune --accum_iter 0"), "--accum_iter must be >= 1");
  expect_usage_error(run("finetune --smoothing 1"), "--smoothing must be in [0, 1)");
  expect_usage_error(run("finetune --mixup_prob 1.5"), "--mixup_prob must be in [0, 1]");
  expect_usage_error(run("finetune --train_crop square"), "square not in {auto,pad,rrc,none}");
}

}  // namespace
