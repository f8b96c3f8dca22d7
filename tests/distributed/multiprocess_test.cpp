// `sparsevit finetune` as several processes on Gloo over loopback, started through
// scripts/launch (or by hand, to kill one): the same parameters as one process with the doubled
// batch, a killed or hung rank turning into one clear error on the other within --dist_timeout,
// and resume across world sizes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/synthetic_idx.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;

const std::string kBinary = SPARSEVIT_BINARY_DIR "/sparsevit";
const std::string kLaunch = SPARSEVIT_SOURCE_DIR "/scripts/launch";

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Result {
  int exit_code = -1;
  std::string out, err, command;
  double seconds = 0;
  std::string describe() const {
    return "command: " + command + "\nexit " + std::to_string(exit_code) + "\n--- stdout ---\n" +
           out.substr(0, 3000) + "\n--- stderr ---\n" + err.substr(err.size() > 4000 ? err.size() - 4000 : 0);
  }
};

Result shell(const std::string& command, const fs::path& io_base) {
  Result r;
  r.command = command;
  const std::string o = io_base.string() + ".out", e = io_base.string() + ".err";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system((command + " >" + quote(o) + " 2>" + quote(e) + " </dev/null").c_str());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

std::string last_line(std::string t) {
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::vector<nlohmann::json> metrics(const fs::path& dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

// max |a - b| / (max |b| + 1e-3) over every tensor of the two checkpoints' models.
double max_relative_difference(const fs::path& a, const fs::path& b) {
  const sparsevit::train::LoadedCheckpoint ca(a.string()), cb(b.string());
  const auto& ta = ca.model_tensors();
  const auto& tb = cb.model_tensors();
  EXPECT_EQ(ta.size(), tb.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(ta.size(), tb.size()); ++i) {
    EXPECT_EQ(ta[i].first, tb[i].first);
    const double diff = (ta[i].second - tb[i].second).abs().max().item<double>();
    const double scale = tb[i].second.abs().max().item<double>() + 1e-3;
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

class Distributed : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sparsevit_dist_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "data");
    sparsevit::testing::write_synthetic_idx(root_ / "data", "train", 64, 1);
    sparsevit::testing::write_synthetic_idx(root_ / "data", "t10k", 30, 2);
  }
  void TearDown() override { fs::remove_all(root_); }

  // finetune on the synthetic set: 64 samples, a nano ViT, deterministic (no drop path, no
  // mixup), one thread per process.
  std::string finetune_args(int batch, int epochs, const std::string& out, const std::string& extra = "") const {
    return "finetune --dataset mnist --data_path " + quote((root_ / "data").string()) +
           " --model vit_nano_patch2_28 --drop_path 0 --blr 5e-3 --warmup_epochs 0.5 --seed 5 --threads 1"
           " --num_workers 1 --print_freq 1 --batch_size " +
           std::to_string(batch) + " --epochs " + std::to_string(epochs) + " --output_dir " +
           quote((root_ / out).string()) + " " + extra;
  }
  Result one(const std::string& args, const std::string& name) const {
    // (no launcher variables: the test itself may run under one)
    return shell(quote(kBinary) + " " + args, root_ / name);
  }
  Result launch(int nproc, const std::string& args, const std::string& name) const {
    return shell(quote(kLaunch) + " --nproc " + std::to_string(nproc) + " -- " + quote(kBinary) + " " + args, root_ / name);
  }

  fs::path root_;
};

TEST_F(Distributed, TwoRanksMatchOneRankWithTheDoubledBatch) {
  // 2 epochs x 4 steps of global batch 16; the 2-rank run reduces gradients in several small
  // buckets while backward runs.
  const Result single = one(finetune_args(16, 2, "single"), "single");
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const Result pair = launch(2, finetune_args(8, 2, "pair", "--dist_bucket_mb 0.02 --dist_timeout 30"), "pair");
  ASSERT_EQ(pair.exit_code, 0) << pair.describe();
  EXPECT_NE(pair.err.find("2 processes"), std::string::npos) << pair.describe();
  EXPECT_NE(pair.err.find("overlapping with backward"), std::string::npos) << pair.describe();

  const double diff = max_relative_difference(root_ / "pair" / "checkpoint.pt", root_ / "single" / "checkpoint.pt");
  EXPECT_LT(diff, 1e-4) << "parameters differ after 8 steps";
  std::cout << "[          ] max relative parameter difference, 2 x 8 vs 1 x 16: " << diff << std::endl;

  // Loss curves, learning rate and the test metrics (evaluated in shards) match too.
  const auto a = metrics(root_ / "single"), b = metrics(root_ / "pair");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(b[e]["train_loss"].get<double>(), a[e]["train_loss"].get<double>(), 1e-4);
    EXPECT_NEAR(b[e]["test_loss"].get<double>(), a[e]["test_loss"].get<double>(), 1e-4);
    EXPECT_DOUBLE_EQ(b[e]["test_acc1"].get<double>(), a[e]["test_acc1"].get<double>());
    EXPECT_DOUBLE_EQ(b[e]["lr"].get<double>(), a[e]["lr"].get<double>());  // blr scaled by the global batch
    EXPECT_EQ(b[e]["world_size"].get<int>(), 2);
  }
  // Only rank 0 reports: one summary on stdout.
  const auto summary = nlohmann::json::parse(last_line(pair.out));
  EXPECT_EQ(summary["epochs"].get<int>(), 2);
  EXPECT_EQ(std::count(pair.out.begin(), pair.out.end(), '{'), 1) << pair.describe();

  // Reducing after backward (no hooks) gives the same parameters.
  const Result plain = launch(2, finetune_args(8, 2, "plain", "--dist_no_overlap --dist_timeout 30"), "plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_LT(max_relative_difference(root_ / "plain" / "checkpoint.pt", root_ / "single" / "checkpoint.pt"), 1e-4);
}

// PyTorch's own launcher through scripts/torchrun (torch.distributed.run with the classic TCPStore:
// Debian 13's torch 2.6 has no libuv, and plain torchrun stops on it), static rendezvous on loopback:
// the same parameters as one process with the doubled batch. torch 1.13's torchrun (Debian 12) fails
// on Python 3.11 before it starts a process (docs/distributed.md), so the test runs where torch >= 2
// (the Debian 13 leg, which sets SPARSEVIT_REQUIRE_PEERS=1 and so fails instead of skipping).
int free_port();

TEST_F(Distributed, TorchrunStartsTheRanks) {
  const bool required = std::getenv("SPARSEVIT_REQUIRE_PEERS") && std::string(std::getenv("SPARSEVIT_REQUIRE_PEERS")) == "1";
  const Result version = shell("/usr/bin/python3 -c 'import torch; print(torch.__version__.split(\".\")[0])'",
                               root_ / "torch_version");
  if (version.exit_code != 0 || version.out.rfind("1\n", 0) == 0) {
    if (required) FAIL() << "torchrun with torch >= 2 is required here: " << version.describe();
    GTEST_SKIP() << "needs torchrun of torch >= 2 (torch 1.13's fails on Python 3.11)";
  }
  const Result single = one(finetune_args(16, 1, "single"), "single");
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const Result pair = shell(quote(SPARSEVIT_SOURCE_DIR "/scripts/torchrun") +
                                " --nproc_per_node 2 --master_addr 127.0.0.1 --master_port " +
                                std::to_string(free_port()) + " --no_python " + quote(kBinary) + " " +
                                finetune_args(8, 1, "torchrun", "--dist_timeout 30"),
                            root_ / "torchrun");
  ASSERT_EQ(pair.exit_code, 0) << pair.describe();
  EXPECT_NE(pair.err.find("2 processes"), std::string::npos) << pair.describe();
  EXPECT_LT(max_relative_difference(root_ / "torchrun" / "checkpoint.pt", root_ / "single" / "checkpoint.pt"), 1e-4);
  const auto m = metrics(root_ / "torchrun");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["world_size"].get<int>(), 2);
}

// MAE pretraining data-parallel like finetune: the lr follows the global batch, rank 0 alone
// writes and reports, the checkpoint resumes. (Each rank draws its own masks, as MAE's do, so the
// run is not the single-process one with a doubled batch.)
TEST_F(Distributed, PretrainRunsDataParallel) {
  const std::string args = "pretrain --dataset mnist --data_path " + quote((root_ / "data").string()) +
                           " --model mae_vit_nano_patch4_28 --blr 1e-2 --warmup_epochs 0 --min_lr 0 --threads 1"
                           " --num_workers 1 --batch_size 8 --dist_timeout 30 --output_dir " +
                           quote((root_ / "mae").string());
  const Result pair = launch(2, args + " --epochs 1", "mae");
  ASSERT_EQ(pair.exit_code, 0) << pair.describe();
  const auto m = metrics(root_ / "mae");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(std::count(pair.out.begin(), pair.out.end(), '{'), 1) << pair.describe();
  EXPECT_TRUE(fs::exists(root_ / "mae" / "checkpoint.pt"));
  EXPECT_GT(nlohmann::json::parse(last_line(pair.out))["train_loss"].get<double>(), 0.0);
  const Result resumed = launch(2, args + " --epochs 2 --resume " + quote((root_ / "mae" / "checkpoint.pt").string()), "mae");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(metrics(root_ / "mae").size(), 2u);
}

TEST_F(Distributed, ResumeAcrossWorldSizes) {
  // Straight: 1 process x 16 for 2 epochs. Then epoch 1 on 2 x 8 resumed on 1 x 16, and epoch
  // 1 on 1 x 16 resumed on 2 x 8 (rendezvous through a FileStore this time): the same run.
  // A constant learning rate after warm-up, so that stopping after epoch 1 of 1 and going on to
  // epoch 2 of 2 follows the straight run's schedule.
  const auto finetune_args = [this](int batch, int epochs, const std::string& out, const std::string& extra = "") {
    return Distributed::finetune_args(batch, epochs, out, "--lr 3e-4 --min_lr 3e-4 --dist_timeout 30 " + extra);
  };
  const Result straight = one(finetune_args(16, 2, "straight"), "straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.describe();

  const Result first2 = launch(2, finetune_args(8, 1, "a"), "a1");
  ASSERT_EQ(first2.exit_code, 0) << first2.describe();
  const Result then1 = one(finetune_args(16, 2, "a", "--resume " + quote((root_ / "a" / "checkpoint.pt").string())), "a2");
  ASSERT_EQ(then1.exit_code, 0) << then1.describe();
  EXPECT_NE(then1.err.find("resumed"), std::string::npos) << then1.describe();

  const Result first1 = one(finetune_args(16, 1, "b"), "b1");
  ASSERT_EQ(first1.exit_code, 0) << first1.describe();
  const Result then2 = launch(2,
                              finetune_args(8, 2, "b",
                                            "--resume " + quote((root_ / "b" / "checkpoint.pt").string()) +
                                                " --dist_url file://" + quote((root_ / "store").string())),
                              "b2");
  ASSERT_EQ(then2.exit_code, 0) << then2.describe();

  EXPECT_LT(max_relative_difference(root_ / "a" / "checkpoint.pt", root_ / "straight" / "checkpoint.pt"), 1e-4);
  EXPECT_LT(max_relative_difference(root_ / "b" / "checkpoint.pt", root_ / "straight" / "checkpoint.pt"), 1e-4);
  const auto s = metrics(root_ / "straight"), a = metrics(root_ / "a"), b = metrics(root_ / "b");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NEAR(a[1]["train_loss"].get<double>(), s[1]["train_loss"].get<double>(), 1e-4);
  EXPECT_NEAR(b[1]["train_loss"].get<double>(), s[1]["train_loss"].get<double>(), 1e-4);
}

// Starts `sparsevit ARGS` as rank `rank` of `world` (the variables scripts/launch sets), with
// stdout / stderr in files; returns the pid.
pid_t spawn_rank(int rank, int world, int port, const std::string& args, const fs::path& io_base) {
  const std::string command = "exec " + quote(kBinary) + " " + args + " >" + quote(io_base.string() + ".out") + " 2>" +
                              quote(io_base.string() + ".err") + " </dev/null";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits up to `limit` seconds; returns the exit status (or -1 = still running, -2 - sig = killed).
int wait_for(pid_t pid, double limit, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -2 - WTERMSIG(status);
    if (*seconds > limit) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A port nobody listens on now (the kernel's choice for port 0), like scripts/launch picks.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// Waits until rank 0 has finished its first epoch (metrics.jsonl has a line).
bool wait_for_first_epoch(const fs::path& out, double limit, pid_t rank0) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < limit) {
    if (::kill(rank0, 0) != 0) return false;
    int status = 0;
    if (::waitpid(rank0, &status, WNOHANG) == rank0) return false;  // it ended early
    if (fs::exists(out / "metrics.jsonl") && fs::file_size(out / "metrics.jsonl") > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void expect_one_clear_line(const fs::path& err_file, const std::string& context) {
  const std::string err = slurp(err_file);
  const std::string line = last_line(err);
  EXPECT_EQ(line.rfind("sparsevit: error: distributed (rank 0 of 2)", 0), 0u) << context << "\n" << err;
  EXPECT_NE(line.find("failed"), std::string::npos) << context << "\n" << err;
  // Nothing after it and no backtrace before it.
  EXPECT_EQ(err.find("Exception raised from"), std::string::npos) << err;
}

TEST_F(Distributed, AKilledRankBecomesAnErrorOnTheOther) {
  const int port = free_port();
  const std::string args = finetune_args(8, 500, "killed", "--dist_timeout 8");
  const pid_t r0 = spawn_rank(0, 2, port, args, root_ / "r0");
  const pid_t r1 = spawn_rank(1, 2, port, args, root_ / "r1");
  if (!wait_for_first_epoch(root_ / "killed", 60, r0)) {
    ::kill(r0, SIGKILL), ::kill(r1, SIGKILL);
    FAIL() << slurp(root_ / "r0.err");
  }
  ::kill(r1, SIGKILL);
  double seconds = 0, ignored = 0;
  wait_for(r1, 10, &ignored);
  const int status = wait_for(r0, 30, &seconds);
  if (status == -1) ::kill(r0, SIGKILL), wait_for(r0, 10, &ignored);
  EXPECT_EQ(status, 1) << slurp(root_ / "r0.err");
  EXPECT_LT(seconds, 8.0 + 2.0) << "rank 0 did not stop within --dist_timeout";
  expect_one_clear_line(root_ / "r0.err", "killed peer");
  std::cout << "[          ] rank 0 stopped " << seconds << " s after rank 1 was killed: "
            << last_line(slurp(root_ / "r0.err")) << std::endl;
}

TEST_F(Distributed, AHungRankTimesOutOnTheOther) {
  const int port = free_port();
  const std::string args = finetune_args(8, 500, "hung", "--dist_timeout 4");
  const pid_t r0 = spawn_rank(0, 2, port, args, root_ / "r0");
  const pid_t r1 = spawn_rank(1, 2, port, args, root_ / "r1");
  if (!wait_for_first_epoch(root_ / "hung", 60, r0)) {
    ::kill(r0, SIGKILL), ::kill(r1, SIGKILL);
    FAIL() << slurp(root_ / "r0.err");
  }
  ::kill(r1, SIGSTOP);  // alive but silent: only the timeout can tell
  double seconds = 0, ignored = 0;
  const int status = wait_for(r0, 30, &seconds);
  ::kill(r1, SIGKILL);
  wait_for(r1, 10, &ignored);
  if (status == -1) ::kill(r0, SIGKILL), wait_for(r0, 10, &ignored);
  EXPECT_EQ(status, 1) << slurp(root_ / "r0.err");
  EXPECT_GT(seconds, 2.0);
  EXPECT_LT(seconds, 4.0 + 6.0) << "rank 0 did not stop within --dist_timeout";
  expect_one_clear_line(root_ / "r0.err", "hung peer");
  std::cout << "[          ] rank 0 stopped " << seconds << " s after rank 1 hung: " << last_line(slurp(root_ / "r0.err"))
            << std::endl;
}

TEST_F(Distributed, LaunchStopsEveryRankWhenOneFails) {
  // Rank 1 dies at once; rank 0 waits in the rendezvous until its timeout or the launcher's
  // grace period; the launcher exits with the failed rank's status.
  const std::string command = quote(kLaunch) + " --nproc 2 --grace 3 -- sh -c " +
                              quote("if [ \"$RANK\" = 1 ]; then exit 7; fi; exec " + quote(kBinary) + " " +
                                    finetune_args(8, 1, "launch_fail", "--dist_timeout 30"));
  const Result r = shell(command, root_ / "launch_fail");
  EXPECT_EQ(r.exit_code, 7) << r.describe();
  EXPECT_LT(r.seconds, 20.0) << r.describe();
  EXPECT_NE(r.err.find("launch: rank 1"), std::string::npos) << r.describe();
}

TEST_F(Distributed, SingleProcessNeedsNoLauncherAndRejectsNccl) {
  // No launcher environment: no process group, exactly as before.
  const Result r = one(finetune_args(16, 1, "alone"), "alone");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("distributed"), std::string::npos) << r.describe();
  const Result nccl = one(finetune_args(16, 1, "nccl", "--dist_backend nccl"), "nccl");
  EXPECT_EQ(nccl.exit_code, 2) << nccl.describe();
  EXPECT_NE(nccl.err.find("nccl"), std::string::npos) << nccl.describe();
}

}  // namespace
