#include "train/checkpoint.h"
#include "util/atomic_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "train/model_ema.h"
#include "train/optimizer.h"
#include "util/errors.h"

namespace sparsevit::train {
namespace {

namespace fs = std::filesystem;

// The atomic writer's leftovers next to `path` ("<path>.tmp.XXXXXX").
std::vector<std::string> temporaries_of(const std::string& path) {
  std::vector<std::string> found;
  const fs::path p(path);
  for (const auto& e : fs::directory_iterator(p.parent_path()))
    if (e.path().filename().string().rfind(p.filename().string() + ".tmp", 0) == 0) found.push_back(e.path().string());
  return found;
}

struct Mlp : torch::nn::Module {
  explicit Mlp(int64_t hidden = 16) {
    fc1 = register_module("fc1", torch::nn::Linear(8, hidden));
    drop = register_module("drop", torch::nn::Dropout(0.2));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 3));
    seen = register_buffer("seen", torch::zeros({1}, torch::kLong));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(drop->forward(torch::gelu(fc1->forward(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::Tensor seen;
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sparsevit_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    detail::set_before_rename_hook({});
    fs::remove_all(dir_);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// One training step: data and dropout draw from torch's generator, the host RNG shifts the
// targets, the lr follows the step count.
void train_step(Mlp& model, torch::optim::AdamW& opt, ModelEma& ema, std::mt19937_64& host, int64_t step) {
  const auto x = torch::randn({6, 8});
  const auto y = (torch::randint(0, 3, {6}, torch::kLong) + static_cast<int64_t>(host() % 3)) % 3;
  set_learning_rate(opt, 1e-2 / (1.0 + step));
  opt.zero_grad();
  const auto loss = torch::nn::functional::cross_entropy(model.forward(x), y);
  loss.backward();
  clip_grad_norm(model.parameters(), 1.0);
  opt.step();
  {
    torch::NoGradGuard g;
    model.seen.add_(6);
  }
  ema.update(model, 0.9);
}

void expect_same_state(torch::nn::Module& a, torch::nn::Module& b) {
  const auto sa = weights::named_state(a), sb = weights::named_state(b);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TRUE(sa[i].second.equal(sb[i].second)) << sa[i].first;
  }
}

TEST_F(CheckpointTest, RoundTripRestoresEverything) {
  torch::manual_seed(0);
  Mlp model;
  auto opt = make_adamw(model, OptimizerConfig{});
  ModelEma ema(model);
  std::mt19937_64 host(99);
  for (int64_t s = 0; s < 3; ++s) train_step(model, *opt, ema, host, s);

  CheckpointContents c;
  c.model = &model;
  c.optimizer = opt.get();
  c.ema = &ema;
  c.epoch = 4;
  c.global_step = 3;
  c.host_rng_state = rng_state_string(host);
  c.metadata_json = R"({"model":"mlp","attention":{"mask":"fibo"}})";
  save_checkpoint(file("ck.pt"), c);
  EXPECT_TRUE(temporaries_of(file("ck.pt")).empty());
  const auto torch_state = torch_cpu_rng_state();

  torch::manual_seed(123);  // a different init and generator position
  Mlp other;
  auto other_opt = make_adamw(other, OptimizerConfig{});
  ModelEma other_ema(other);
  const LoadedCheckpoint ck(file("ck.pt"));
  EXPECT_EQ(ck.epoch(), 4);
  EXPECT_EQ(ck.global_step(), 3);
  EXPECT_EQ(ck.metadata_json(), c.metadata_json);
  EXPECT_TRUE(ck.has_optimizer());
  EXPECT_TRUE(ck.has_ema());
  EXPECT_TRUE(ck.has_torch_rng());
  ASSERT_EQ(ck.model_tensors().size(), 5u);
  EXPECT_EQ(ck.model_tensors()[0].first, "fc1.weight");
  ck.load_model(other);
  ck.load_optimizer(*other_opt);
  ck.load_ema(other_ema);
  ck.restore_torch_rng();
  std::mt19937_64 other_host;
  rng_from_state_string(other_host, ck.host_rng_state());

  expect_same_state(model, other);
  EXPECT_EQ(other.seen.item<int64_t>(), 18);
  for (size_t i = 0; i < ema.tensors().size(); ++i) {
    EXPECT_TRUE(ema.tensors()[i].second.equal(other_ema.tensors()[i].second));
  }
  EXPECT_TRUE(torch_cpu_rng_state().equal(torch_state));
  EXPECT_EQ(other_host(), host());
  // The optimizer moments and step counts came back too: the same next step. (Hyper-parameters
  // are the receiving optimizer's own; the trainer sets the lr every iteration.)
  set_learning_rate(*opt, 1e-2);
  set_learning_rate(*other_opt, 1e-2);
  for (auto* m : {&model, &other}) {
    for (auto& p : m->parameters()) p.mutable_grad() = torch::full_like(p, 0.5);
  }
  opt->step();
  other_opt->step();
  expect_same_state(model, other);
}

TEST_F(CheckpointTest, ModelOnlyCheckpoint) {
  Mlp model;
  CheckpointContents c;
  c.model = &model;
  c.save_torch_rng = false;
  save_checkpoint(file("m.pt"), c);
  const LoadedCheckpoint ck(file("m.pt"));
  EXPECT_FALSE(ck.has_optimizer());
  EXPECT_FALSE(ck.has_ema());
  EXPECT_FALSE(ck.has_torch_rng());
  EXPECT_EQ(ck.metadata_json(), "{}");
  Mlp other;
  auto opt = make_adamw(other, OptimizerConfig{});
  ModelEma ema(other);
  EXPECT_THROW(ck.load_optimizer(*opt), RuntimeError);
  EXPECT_THROW(ck.load_ema(ema), RuntimeError);
  EXPECT_THROW(ck.restore_torch_rng(), RuntimeError);
  ck.load_model(other);
  expect_same_state(model, other);
}

TEST_F(CheckpointTest, ResumeIsBitIdentical) {
  constexpr int k = 3, n = 4;
  torch::manual_seed(7);
  Mlp model;
  model.train();
  auto opt = make_adamw(model, OptimizerConfig{});
  ModelEma ema(model);
  std::mt19937_64 host(5);
  for (int s = 0; s < k; ++s) train_step(model, *opt, ema, host, s);
  CheckpointContents c;
  c.model = &model;
  c.optimizer = opt.get();
  c.ema = &ema;
  c.global_step = k;
  c.host_rng_state = rng_state_string(host);
  save_checkpoint(file("resume.pt"), c);
  for (int s = k; s < k + n; ++s) train_step(model, *opt, ema, host, s);  // straight run

  auto resume = [&](bool restore_rng) {
    torch::manual_seed(1000);
    auto fresh = std::make_shared<Mlp>();
    fresh->train();
    auto fresh_opt = make_adamw(*fresh, OptimizerConfig{});
    ModelEma fresh_ema(*fresh);
    std::mt19937_64 fresh_host(5);
    const LoadedCheckpoint ck(file("resume.pt"));
    ck.load_model(*fresh);
    ck.load_optimizer(*fresh_opt);
    ck.load_ema(fresh_ema);
    if (restore_rng) {
      ck.restore_torch_rng();
      rng_from_state_string(fresh_host, ck.host_rng_state());
    }
    for (int64_t s = ck.global_step(); s < k + n; ++s) train_step(*fresh, *fresh_opt, fresh_ema, fresh_host, s);
    return std::make_pair(fresh, weights::clone_named(fresh_ema.tensors()));
  };
  const auto [resumed, resumed_ema] = resume(true);
  expect_same_state(model, *resumed);
  for (size_t i = 0; i < ema.tensors().size(); ++i) EXPECT_TRUE(ema.tensors()[i].second.equal(resumed_ema[i].second));
  // The check is sensitive: without the RNG states the runs part ways.
  const auto [diverged, unused] = resume(false);
  EXPECT_FALSE(model.fc1->weight.equal(diverged->fc1->weight));
}

TEST_F(CheckpointTest, FailedWriteLeavesTheOldFileIntact) {
  torch::manual_seed(0);
  Mlp model;
  CheckpointContents c;
  c.model = &model;
  c.epoch = 1;
  save_checkpoint(file("ck.pt"), c);
  const auto before = fs::file_size(file("ck.pt"));

  Mlp changed;
  c.model = &changed;
  c.epoch = 2;
  // The temporary can't be created: its folder does not exist (works as root too).
  try {
    save_checkpoint(file("no_such_dir/ck.pt"), c);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create temporary file"), std::string::npos) << e.what();
  }
  // A crash between write and rename (the hook throws): the old file wins, no temporary remains.
  detail::set_before_rename_hook([](const std::string& t) {
    ASSERT_TRUE(fs::exists(t));
    throw std::runtime_error("simulated crash");
  });
  EXPECT_THROW(save_checkpoint(file("ck.pt"), c), std::runtime_error);
  detail::set_before_rename_hook({});
  EXPECT_TRUE(temporaries_of(file("ck.pt")).empty());
  EXPECT_EQ(fs::file_size(file("ck.pt")), before);
  const LoadedCheckpoint old(file("ck.pt"));
  EXPECT_EQ(old.epoch(), 1);
  Mlp check;
  old.load_model(check);
  expect_same_state(model, check);
  // Into a folder that does not exist.
  EXPECT_THROW(save_checkpoint(file("missing/ck.pt"), c), RuntimeError);
  // A successful save then replaces it.
  save_checkpoint(file("ck.pt"), c);
  EXPECT_EQ(LoadedCheckpoint(file("ck.pt")).epoch(), 2);
}

std::string expect_load_error(const std::string& path) {
  try {
    LoadedCheckpoint ck(path);
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind("checkpoint " + path + ": ", 0), 0u) << what;
    return what;
  }
  ADD_FAILURE() << "expected RuntimeError for " << path;
  return "";
}

TEST_F(CheckpointTest, MissingTruncatedCorruptFilesAreClearErrors) {
  Mlp model;
  CheckpointContents c;
  c.model = &model;
  save_checkpoint(file("good.pt"), c);
  std::string bytes;
  {
    std::ifstream in(file("good.pt"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(file(name), std::ios::binary) << content;
    return file(name);
  };
  EXPECT_NE(expect_load_error(file("nope.pt")).find("no such file"), std::string::npos);
  EXPECT_NE(expect_load_error(write("empty.pt", "")).find("truncated"), std::string::npos);
  EXPECT_NE(expect_load_error(write("half.pt", bytes.substr(0, bytes.size() / 2))).find("truncated"), std::string::npos);
  EXPECT_NE(expect_load_error(write("long.pt", bytes + "xx")).find("corrupt"), std::string::npos);
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  EXPECT_NE(expect_load_error(write("flip.pt", flipped)).find("corrupt"), std::string::npos);
  EXPECT_NE(expect_load_error(write("text.pt", "this is not a checkpoint at all, just some text\n")).find("not a sparsevit"),
            std::string::npos);
  // A plain torch archive (e.g. torch::save of a module) is recognised as foreign.
  torch::save(model.fc1, file("torch.pt"));
  EXPECT_NE(expect_load_error(file("torch.pt")).find("not a sparsevit"), std::string::npos);
  EXPECT_NO_THROW(LoadedCheckpoint{file("good.pt")});
}

TEST_F(CheckpointTest, ShapeAndNameMismatchesNameTheParameter) {
  Mlp small(16);
  CheckpointContents c;
  c.model = &small;
  save_checkpoint(file("small.pt"), c);
  const LoadedCheckpoint ck(file("small.pt"));
  Mlp large(32);
  const auto before = large.fc1->weight.clone();
  try {
    ck.load_model(large);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + file("small.pt") + ": parameter fc1.weight has shape [16, 8], model expects [32, 8]");
  }
  EXPECT_TRUE(large.fc1->weight.equal(before)) << "a failed load must change nothing";
  torch::nn::Linear other(8, 16);
  try {
    ck.load_model(*other);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("missing 2 of the model's tensors: weight, bias"), std::string::npos)
        << e.what();
  }
  // Optimizer state for a different model.
  auto opt = make_adamw(small, OptimizerConfig{});
  for (auto& p : small.parameters()) p.mutable_grad() = torch::ones_like(p);
  opt->step();
  c.optimizer = opt.get();
  save_checkpoint(file("with_opt.pt"), c);
  auto large_opt = make_adamw(large, OptimizerConfig{});
  try {
    LoadedCheckpoint(file("with_opt.pt")).load_optimizer(*large_opt);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer state of shape [16, 8] does not fit a parameter of shape [32, 8]"),
              std::string::npos)
        << e.what();
  }
  torch::nn::Linear single(8, 3);
  auto single_opt = make_adamw(*single, OptimizerConfig{});
  EXPECT_THROW(LoadedCheckpoint(file("with_opt.pt")).load_optimizer(*single_opt), RuntimeError);
}

TEST_F(CheckpointTest, BadArgumentsAndRngText) {
  CheckpointContents c;
  EXPECT_THROW(save_checkpoint(file("x.pt"), c), UsageError);
  Mlp model;
  c.model = &model;
  c.metadata_json = "{not json";
  EXPECT_THROW(save_checkpoint(file("x.pt"), c), UsageError);
  std::mt19937_64 rng(3);
  rng.discard(10);
  std::mt19937_64 copy;
  rng_from_state_string(copy, rng_state_string(rng));
  EXPECT_EQ(copy(), rng());
  EXPECT_THROW(rng_from_state_string(copy, "12 34"), RuntimeError);
}

}  // namespace
}  // namespace sparsevit::train
