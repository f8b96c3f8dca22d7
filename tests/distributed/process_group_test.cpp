// The c10d wrapper in one process: the launcher environment, and two ranks as two threads,
// each with its own Gloo process group over a FileStore (loopback).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed/gradient_reducer.h"
#include "distributed/launch_environment.h"
#include "distributed/process_group.h"
#include "distributed/tcp_store_options.h"
#include "util/errors.h"

namespace sparsevit::dist {
namespace {

namespace fs = std::filesystem;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LaunchInfo, NoEnvironmentIsOneProcess) {
  const LaunchInfo info = launch_info_from_environment(env_of({}));
  EXPECT_FALSE(info.distributed());
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.launcher, "");
}

TEST(LaunchInfo, TorchrunVariables) {
  const LaunchInfo info = launch_info_from_environment(env_of({{"RANK", "3"},
                                                               {"WORLD_SIZE", "8"},
                                                               {"LOCAL_RANK", "1"},
                                                               {"LOCAL_WORLD_SIZE", "2"},
                                                               {"MASTER_ADDR", "node0"},
                                                               {"MASTER_PORT", "1234"}}));
  EXPECT_TRUE(info.distributed());
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "node0");
  EXPECT_EQ(info.master_port, 1234);
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_FALSE(info.agent_store);
  const LaunchInfo agent = launch_info_from_environment(env_of({{"RANK", "1"},
                                                                {"WORLD_SIZE", "2"},
                                                                {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                                {"TORCHELASTIC_RESTART_COUNT", "3"}}));
  EXPECT_TRUE(agent.agent_store);
  EXPECT_EQ(agent.restart_count, 3);
}

TEST(LaunchInfo, OpenMpiVariables) {
  const LaunchInfo info = launch_info_from_environment(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                                               {"OMPI_COMM_WORLD_SIZE", "4"},
                                                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                               {"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.launcher, "mpirun");
}

TEST(LaunchInfo, InconsistentVariablesAreUsageErrors) {
  EXPECT_THROW(launch_info_from_environment(env_of({{"RANK", "0"}})), UsageError);
  EXPECT_THROW(launch_info_from_environment(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}})), UsageError);
  EXPECT_THROW(launch_info_from_environment(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}})), UsageError);
  EXPECT_THROW(launch_info_from_environment(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}})),
               UsageError);
}

TEST(ProcessGroupCreate, BadBackendOrUrlIsAUsageError) {
  LaunchInfo info;
  info.world_size = 2;
  EXPECT_TRUE(backend_available("gloo"));
  EXPECT_THROW(ProcessGroup::create(info, {"mpi", "env://", 5}), UsageError);
  EXPECT_THROW(ProcessGroup::create(info, {"gloo", "http://x", 5}), UsageError);
  EXPECT_THROW(ProcessGroup::create(info, {"gloo", "tcp://nohostport", 5}), UsageError);
  EXPECT_THROW(ProcessGroup::create(info, {"gloo", "env://", 0}), UsageError);
  if (!backend_available("nccl")) {
    try {
      ProcessGroup::create(info, {"nccl", "env://", 5});
      FAIL() << "nccl accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("NCCL"), std::string::npos) << e.what();
    }
  }
}

// Runs body(rank) on `world` threads, each with a process group over one FileStore.
class ThreadRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsevit_pg_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void run(int world, const std::function<void(ProcessGroup&)>& body) {
    static int counter = 0;
    const std::string url = "file://" + (dir_ / ("store" + std::to_string(counter++))).string();
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        try {
          at::set_num_threads(1);
          LaunchInfo info;
          info.rank = r;
          info.world_size = world;
          info.local_rank = r;
          info.local_world_size = world;
          auto pg = ProcessGroup::create(info, {"gloo", url, 20});
          body(*pg);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  fs::path dir_;
};

TEST_F(ThreadRanks, AllreduceBroadcastBarrier) {
  run(2, [](ProcessGroup& pg) {
    EXPECT_EQ(pg.world_size(), 2);
    at::Tensor t = at::full({5}, static_cast<double>(pg.rank() + 1), at::kDouble);
    pg.allreduce_sum(t);
    EXPECT_TRUE(at::allclose(t, at::full({5}, 3.0, at::kDouble)));
    // Several tensors of two dtypes and tiny buckets: several collectives, each rank gets rank 0's.
    std::vector<at::Tensor> ts = {at::full({3, 2}, 10.0f * static_cast<float>(pg.rank() + 1)),
                                  at::full({7}, static_cast<float>(pg.rank())),
                                  at::full({2}, static_cast<int64_t>(pg.rank() + 5), at::kLong)};
    pg.broadcast(ts, 0, /*bucket_bytes=*/16);
    EXPECT_TRUE(at::equal(ts[0], at::full({3, 2}, 10.0f)));
    EXPECT_TRUE(at::equal(ts[1], at::zeros({7})));
    EXPECT_TRUE(at::equal(ts[2], at::full({2}, 5, at::kLong)));
    pg.barrier();
  });
}

struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl() {
    a = register_module("a", torch::nn::Linear(6, 16));
    b = register_module("b", torch::nn::Linear(16, 16));
    c = register_module("c", torch::nn::Linear(16, 3));
    unused = register_parameter("unused", torch::ones({4}));
  }
  at::Tensor forward(const at::Tensor& x) { return c(torch::tanh(b(torch::relu(a(x))))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
  at::Tensor unused;
};
TORCH_MODULE(TinyNet);

// A TinyNet with init's parameters (plus `offset`).
TinyNet copy_of(const TinyNet& init, float offset = 0.0f) {
  TinyNet net;
  torch::NoGradGuard no_grad;
  auto src = init->parameters(), dst = net->parameters();
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i] + offset);
  return net;
}

// The gradient of the mean loss over the whole batch, on one model: what the ranks' averaged
// gradients of their halves must equal.
std::vector<at::Tensor> reference_grads(const TinyNet& init, const at::Tensor& x, const at::Tensor& y) {
  TinyNet net = copy_of(init);
  torch::nn::functional::cross_entropy(net->forward(x), y).backward();
  std::vector<at::Tensor> grads;
  for (const auto& p : net->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  return grads;
}

TEST_F(ThreadRanks, GradientReducerAveragesLikeOneBigBatch) {
  torch::manual_seed(7);
  TinyNet init;
  const at::Tensor x = torch::randn({8, 6}), y = torch::randint(0, 3, {8});
  const std::vector<at::Tensor> expected = reference_grads(init, x, y);
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "after backward");
    run(2, [&](ProcessGroup& pg) {
      TinyNet net = copy_of(init, static_cast<float>(pg.rank()));  // rank 1 differs
      std::vector<at::Tensor> state = net->parameters();
      pg.broadcast(state, 0, 64);
      // 256-byte buckets: several collectives per step.
      GradientReducer reducer(pg, net->parameters(), 256, overlap);
      EXPECT_GT(reducer.num_buckets(), 3);
      const at::Tensor mine = x.narrow(0, pg.rank() * 4, 4), labels = y.narrow(0, pg.rank() * 4, 4);
      for (int step = 0; step < 2; ++step) {  // the reducer resets between steps
        for (auto& p : net->parameters())
          if (p.grad().defined()) p.mutable_grad().zero_();
        torch::nn::functional::cross_entropy(net->forward(mine), labels).backward();
        reducer.finish();
        if (overlap) {
          EXPECT_GT(reducer.buckets_started_during_backward(), 0);
        }
        const auto params = net->parameters();
        for (std::size_t i = 0; i < params.size(); ++i) {
          ASSERT_TRUE(params[i].grad().defined()) << i;
          EXPECT_TRUE(at::allclose(params[i].grad(), expected[i], 1e-5, 1e-6))
              << "parameter " << i << " step " << step << " rank " << pg.rank();
        }
      }
    });
  }
}

TEST_F(ThreadRanks, GradientAccumulationReducesOnlyTheLastMicroBatch) {
  // --accum_iter 2: each rank runs two micro-batches of 2 (loss / 2 each) with the reducer's sync
  // off for the first; the synced backward reduces the accumulated sum. The result is the
  // gradient of the mean loss over all 8 samples, for overlapped and post-backward reduction.
  torch::manual_seed(11);
  TinyNet init;
  const at::Tensor x = torch::randn({8, 6}), y = torch::randint(0, 3, {8});
  const std::vector<at::Tensor> expected = reference_grads(init, x, y);
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "after backward");
    run(2, [&](ProcessGroup& pg) {
      TinyNet net = copy_of(init);
      GradientReducer reducer(pg, net->parameters(), 256, overlap);
      for (int step = 0; step < 2; ++step) {
        for (auto& p : net->parameters())
          if (p.grad().defined()) p.mutable_grad().zero_();
        for (int micro = 0; micro < 2; ++micro) {
          reducer.set_sync(micro == 1);
          const int64_t start = pg.rank() * 4 + micro * 2;
          (torch::nn::functional::cross_entropy(net->forward(x.narrow(0, start, 2)), y.narrow(0, start, 2)) / 2.0)
              .backward();
        }
        reducer.finish();
        const auto params = net->parameters();
        for (std::size_t i = 0; i < params.size(); ++i) {
          ASSERT_TRUE(params[i].grad().defined()) << i;
          EXPECT_TRUE(at::allclose(params[i].grad(), expected[i], 1e-5, 1e-6))
              << "parameter " << i << " step " << step << " rank " << pg.rank();
        }
      }
    });
  }
}

TEST_F(ThreadRanks, TorchrunsAgentStore) {
  // torchrun's agent serves the store; the ranks connect as clients under its key prefix.
  c10d::TCPStoreOptions o = sparsevit::dist::classic_tcp_store_options();
  o.port = 0;
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = std::chrono::seconds(20);
  auto agent = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        LaunchInfo info;
        info.rank = r;
        info.world_size = 2;
        info.local_world_size = 2;
        info.master_port = agent->getPort();
        info.agent_store = true;
        info.restart_count = 2;
        auto pg = ProcessGroup::create(info, {"gloo", "env://", 20});
        at::Tensor t = at::ones({3});
        pg->allreduce_sum(t);
        EXPECT_TRUE(at::equal(t, at::full({3}, 2.0f)));
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  EXPECT_GT(agent->getNumKeys(), 0);  // the ranks met in the agent's store
}

TEST_F(ThreadRanks, APeerThatNeverJoinsTimesOut) {
  // Only rank 0 of 2 starts: the rendezvous fails within the timeout with one clear line.
  LaunchInfo info;
  info.rank = 0;
  info.world_size = 2;
  info.local_world_size = 2;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ProcessGroup::create(info, {"gloo", "file://" + (dir_ / "lonely").string(), 2});
    FAIL() << "rendezvous without the peer succeeded";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0 of 2"), std::string::npos) << what;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace sparsevit::dist
