// The only translation unit that touches c10d (with tcp_store_options.h). LibTorch 1.13: ProcessGroupGloo derives from
// c10d::ProcessGroup; 2.x: from c10d::Backend (the ProcessGroup became a dispatcher). We hold the
// concrete backend through that base and call only what both versions have: the constructors,
// allreduce / broadcast / barrier and Work::wait.
#include "distributed/process_group.h"

#include "distributed/tcp_store_options.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

// The c10d headers compile their Gloo (and NCCL) parts only under these macros, which the
// LibTorch build defined for itself but does not export to users.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#if defined(SPARSEVIT_HAVE_NCCL) && !defined(USE_C10D_NCCL)
#define USE_C10D_NCCL 1
#endif

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef SPARSEVIT_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "util/errors.h"

namespace sparsevit::dist {

namespace {


#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// The first line of an exception's message, without LibTorch's backtrace or Gloo's
// "[path/to/file.cc:123] " source location prefix.
std::string one_line(std::string message) {
  message = message.substr(0, message.find('\n'));
  if (!message.empty() && message.front() == '[') {
    const auto close = message.find("] ");
    if (close != std::string::npos && message.find(':') < close) message = message.substr(close + 2);
  }
  while (!message.empty() && (message.back() == ' ' || message.back() == '\r')) message.pop_back();
  return message.empty() ? "unknown error" : message;
}

std::string current_exception_line() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return one_line(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return one_line(e.what());
  } catch (...) {
    return "unknown error";
  }
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string seconds_text(double s) {
  std::string t = std::to_string(s);
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}

}  // namespace

bool backend_available(const std::string& backend) {
  if (backend == "gloo") return true;
#ifdef SPARSEVIT_HAVE_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<BackendBase> backend;
  std::map<int64_t, c10::intrusive_ptr<c10d::Work>> pending;
  int64_t next_handle = 0;
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl, int64_t rank, int64_t world_size, double timeout,
                           std::string backend)
    : impl_(std::move(impl)), rank_(rank), world_size_(world_size), timeout_seconds_(timeout), backend_(std::move(backend)) {}

ProcessGroup::~ProcessGroup() {
  // Outstanding work (only after an error) is waited for, bounded by the collectives' timeout.
  for (auto& [handle, work] : impl_->pending) {
    try {
      work->wait();
    } catch (...) {
    }
  }
}

std::unique_ptr<ProcessGroup> ProcessGroup::create(const LaunchInfo& info, const InitOptions& options) {
  if (options.backend != "gloo" && options.backend != "nccl")
    throw UsageError("--dist_backend must be gloo or nccl, got '" + options.backend + "'");
  if (!backend_available(options.backend))
    throw UsageError("--dist_backend " + options.backend +
                     ": this LibTorch build has no NCCL (it is a CPU build); use --dist_backend gloo");
  if (options.backend == "nccl")
    throw UsageError("--dist_backend nccl: the trainer runs on the CPU and NCCL reduces CUDA tensors only; "
                     "use --dist_backend gloo");
  if (!(options.timeout_seconds > 0)) throw UsageError("--dist_timeout must be > 0 seconds");
  if (info.world_size < 1 || info.rank < 0 || info.rank >= info.world_size)
    throw UsageError("rank " + std::to_string(info.rank) + " is not in [0, world size " + std::to_string(info.world_size) + ")");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000.0));
  const std::string& url = options.url;
  const std::string who = "distributed (rank " + std::to_string(info.rank) + " of " + std::to_string(info.world_size) + ")";

  std::string host = info.master_addr;
  int64_t port = info.master_port;
  std::string file_path;
  if (url.empty() || url == "env://") {
  } else if (url.rfind("tcp://", 0) == 0) {
    const std::string rest = url.substr(6);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) throw UsageError("--dist_url " + url + ": expected tcp://HOST:PORT");
    host = rest.substr(0, colon);
    port = parse_env_int("the --dist_url port", rest.substr(colon + 1));
    if (port < 1 || port > 65535) throw UsageError("--dist_url " + url + ": the port must be in [1, 65535]");
  } else if (url.rfind("file://", 0) == 0) {
    file_path = url.substr(7);
    if (file_path.empty()) throw UsageError("--dist_url " + url + ": expected file:///PATH");
  } else {
    throw UsageError("--dist_url must be env://, tcp://HOST:PORT or file:///PATH, got '" + url + "'");
  }

  auto impl = std::make_unique<Impl>();
  const std::string where = file_path.empty() ? "tcp://" + host + ":" + std::to_string(port) : "file://" + file_path;
  try {
    if (!file_path.empty()) {
      impl->store = c10::make_intrusive<c10d::FileStore>(file_path, static_cast<int>(info.world_size));
      impl->store->setTimeout(timeout);
    } else {
      const bool agent = info.agent_store && (url.empty() || url == "env://");
      c10d::TCPStoreOptions o = classic_tcp_store_options();
      o.port = static_cast<std::uint16_t>(port);
      o.isServer = info.rank == 0 && !agent;
      o.numWorkers = static_cast<std::size_t>(info.world_size);
      o.waitWorkers = !agent;
      o.timeout = timeout;
      o.multiTenant = true;
      auto tcp = c10::make_intrusive<c10d::TCPStore>(host, o);
      if (agent) {
        impl->store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(info.restart_count), tcp);
      } else {
        impl->store = tcp;
      }
    }
  } catch (...) {
    throw RuntimeError(who + ": rendezvous at " + where + " failed: " + current_exception_line() +
                       (file_path.empty() ? " (is MASTER_ADDR:MASTER_PORT right and the port free? did every rank start?)"
                                          : " (use a fresh file for every run)"));
  }

  try {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    // The interface Gloo's peers connect to: GLOO_SOCKET_IFNAME as in PyTorch; loopback when
    // the job is on this machine (its hostname may not resolve); else the hostname's address.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    const bool single_node = info.local_world_size >= info.world_size;
    if (ifname != nullptr && *ifname != '\0') {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if ((file_path.empty() && is_loopback(host)) || single_node) {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    impl->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, static_cast<int>(info.rank),
                                                                static_cast<int>(info.world_size), gloo_options);
  } catch (...) {
    throw RuntimeError(who + ": connecting the gloo process group (rendezvous " + where +
                       ") failed: " + current_exception_line() + " (did every rank start within --dist_timeout " +
                       seconds_text(options.timeout_seconds) + " s?)");
  }
  return std::unique_ptr<ProcessGroup>(
      new ProcessGroup(std::move(impl), info.rank, info.world_size, options.timeout_seconds, options.backend));
}

void ProcessGroup::fail(const std::string& op, const std::string& why) const {
  throw RuntimeError("distributed (rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + "): " + op +
                     " failed: " + why + " (another rank exited, was killed, or did not answer within --dist_timeout " +
                     seconds_text(timeout_seconds_) + " s)");
}

void ProcessGroup::rethrow(const std::string& op) const { fail(op, current_exception_line()); }

void ProcessGroup::allreduce_sum(at::Tensor& tensor) {
  try {
    std::vector<at::Tensor> tensors{tensor};
    impl_->backend->allreduce(tensors)->wait();
  } catch (...) {
    rethrow("allreduce");
  }
}

int64_t ProcessGroup::allreduce_sum_async(at::Tensor& tensor) {
  try {
    std::vector<at::Tensor> tensors{tensor};
    const int64_t handle = impl_->next_handle++;
    impl_->pending.emplace(handle, impl_->backend->allreduce(tensors));
    return handle;
  } catch (...) {
    rethrow("allreduce");
  }
}

void ProcessGroup::wait(int64_t handle) {
  const auto it = impl_->pending.find(handle);
  if (it == impl_->pending.end()) throw RuntimeError("distributed: wait on an unknown handle " + std::to_string(handle));
  const c10::intrusive_ptr<c10d::Work> work = it->second;
  impl_->pending.erase(it);
  try {
    work->wait();
  } catch (...) {
    rethrow("allreduce");
  }
}

void ProcessGroup::barrier() {
  try {
    impl_->backend->barrier()->wait();
  } catch (...) {
    rethrow("barrier");
  }
}

void ProcessGroup::broadcast(const std::vector<at::Tensor>& tensors, int64_t root, int64_t bucket_bytes) {
  at::NoGradGuard no_grad;
  std::size_t begin = 0;
  while (begin < tensors.size()) {
    // A bucket: consecutive tensors of one dtype, at most bucket_bytes (at least one tensor).
    std::size_t end = begin;
    int64_t bytes = 0;
    while (end < tensors.size() && tensors[end].scalar_type() == tensors[begin].scalar_type() &&
           (end == begin || bytes + static_cast<int64_t>(tensors[end].nbytes()) <= bucket_bytes)) {
      bytes += static_cast<int64_t>(tensors[end].nbytes());
      ++end;
    }
    std::vector<at::Tensor> flat_parts;
    for (std::size_t i = begin; i < end; ++i) flat_parts.push_back(tensors[i].detach().reshape(-1));
    std::vector<at::Tensor> flat{at::cat(flat_parts)};
    try {
      c10d::BroadcastOptions o;
      o.rootRank = root;
      impl_->backend->broadcast(flat, o)->wait();
    } catch (...) {
      rethrow("broadcast");
    }
    int64_t offset = 0;
    for (std::size_t i = begin; i < end; ++i) {
      const int64_t n = tensors[i].numel();
      at::Tensor target = tensors[i];
      target.detach().copy_(flat[0].narrow(0, offset, n).view(tensors[i].sizes()));
      offset += n;
    }
    begin = end;
  }
}

// ---- gradient reducer ----

}  // namespace sparsevit::dist
