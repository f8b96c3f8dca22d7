// A CTA of the tiled kernels on the host (diagonal_tiles.h's Cta): every group and lane in loops,
// the phases between barriers run in order, shared memory a host buffer, and every global access
// counted (memory_traffic.h). A warp's load instruction is the same call, in program order, by the
// 32 threads of one warp: each thread numbers its global loads since the last barrier, and the
// sectors of one instruction are counted once (its lanes' addresses ascend with the lane, so a
// sector is new when it differs from the previous lane's). Threads that skip a copy call idle() so
// that their numbering stays with their warp's. In count-only mode nothing is read or computed:
// the tensors' pointers are addresses only.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "ops/cuda/diagonal_tiles.h"
#include "ops/cuda/memory_traffic.h"

namespace sparsevit::ops::cuda {

class EmulatedCta {
 public:
  EmulatedCta(int lanes, int threads, bool count_only, MemoryTraffic* traffic)
      : lanes_(lanes), threads_(threads), count_only_(count_only), traffic_(traffic),
        smem_(new char[kSmemBudget + 16]()), seq_(threads, 0), last_((threads + kWarpLanes - 1) / kWarpLanes) {}

  LaneRange groups() const { return {0, threads_ / lanes_}; }
  LaneRange lanes() const { return {0, lanes_}; }
  LaneRange threads() const { return {0, threads_}; }
  int num_threads() const { return threads_; }
  int tid(int g, int lane) const { return g * lanes_ + lane; }
  bool compute() const { return !count_only_; }
  char* smem() { return smem_.get() + (16 - reinterpret_cast<uintptr_t>(smem_.get()) % 16) % 16; }

  // The device's __shfl_xor_sync butterfly over the group's lanes, level by level.
  template <typename T>
  T group_sum(int, const LaneSlots<T>& x) const {
    T v[kHostLanes] = {}, next[kHostLanes] = {};
    for (int l = 0; l < lanes_; ++l) v[l] = x[l];
    for (int offset = lanes_ / 2; offset >= 1; offset /= 2) {
      for (int l = 0; l < lanes_; ++l) next[l] = butterfly_combine(v[l], v[l ^ offset]);
      for (int l = 0; l < lanes_; ++l) v[l] = next[l];
    }
    return v[0];
  }

  void sync() {
    std::fill(seq_.begin(), seq_.end(), 0);
    for (auto& w : last_) w.clear();
  }
  void commit() {}
  void wait(int) {}

  void copy(int t, void* dst, const void* src, int bytes) {
    record(t, src);
    traffic_->bytes_staged += bytes;
    if (!count_only_) std::memcpy(dst, src, bytes);
  }
  void idle(int t) { ++seq_[t]; }
  template <typename U>
  U load(int t, const U* p) {
    record(t, p);
    return count_only_ ? U{} : *p;
  }
  template <typename S>
  void load16(int t, S* dst, const S* src) {
    record(t, src);
    if (count_only_) {
      std::memset(static_cast<void*>(dst), 0, 16);
    } else {
      std::memcpy(dst, src, 16);
    }
  }
  template <typename U>
  void store(int, U* p, U v) {
    traffic_->bytes_written += sizeof(U);
    if (!count_only_) *p = v;
  }
  template <typename S>
  void store16(int, S* dst, const S* src) {
    traffic_->bytes_written += 16;
    if (!count_only_) std::memcpy(dst, src, 16);
  }

 private:
  void record(int t, const void* p) {
    const int64_t sector = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) >> 5);
    std::vector<int64_t>& w = last_[t / kWarpLanes];
    const int s = seq_[t]++;
    if (static_cast<int>(w.size()) <= s) w.resize(s + 1, -1);
    if (w[s] != sector) {
      ++traffic_->sectors_read;
      w[s] = sector;
    }
  }

  int lanes_, threads_;
  bool count_only_;
  MemoryTraffic* traffic_;
  std::unique_ptr<char[]> smem_;
  std::vector<int> seq_;
  std::vector<std::vector<int64_t>> last_;  // per warp, per instruction: the last sector counted
};

}  // namespace sparsevit::ops::cuda
