// Batches from a Dataset through a Transform, built by worker threads ahead of the consumer.
//
// Determinism: sample i of epoch e is transformed with make_rng(seed, kSample, e, i), and the
// epoch order is an explicit Fisher-Yates shuffle of make_rng(seed, kShuffle, e), so the
// batches depend on (seed, epoch, rank, world_size, batch_size) only: not on num_workers,
// prefetch depth or thread timing. Batches arrive in order.
//
// Distributed: like torch's DistributedSampler, the (shuffled) order is padded by repeating
// its start to a multiple of world_size (or cut to one when drop_last), and rank r takes
// positions r, r + world_size, ... so ranks get disjoint shards of equal length.
// Batch k of every rank then holds global positions [k·B·W, (k+1)·B·W) (B = batch_size,
// W = world_size): the W ranks' batches k together are exactly batch k of one process with
// batch B·W over the same order, and each sample keeps its augmentation (keyed by dataset
// index, not rank), so W ranks × B train on the same global batches as 1 × B·W.
// even_shards = false (evaluation): no padding or cutting; rank r takes positions r, r + W,
// ... < n, so every sample is seen exactly once and shard sizes differ by at most one.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace sparsevit::data {

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  bool drop_last = false;        // drop the last incomplete batch (and, distributed, the tail
                                 // that does not divide by world_size instead of padding)
  int64_t num_workers = 0;       // 0: batches are built in next() on the caller's thread
  uint64_t seed = 0;
  int64_t prefetch_batches = 2;  // batches in flight per worker
  int64_t rank = 0;
  int64_t world_size = 1;
  bool even_shards = true;       // pad (or cut) so every rank gets the same number of samples
};

struct Batch {
  at::Tensor images;             // [B, C, H, W] (float32 from the pipelines; the transform's dtype)
  at::Tensor labels;             // int64 [B]
  std::vector<int64_t> indices;  // dataset indices of the B samples
  // Pipeline-specific tensors of the same B samples beside the images (the diffusion policy's
  // agent positions and action chunks); empty for classification.
  std::map<std::string, at::Tensor> extras;
};

// What the training engine consumes: epochs of batches. DataLoader is the one for datasets;
// tests feed fixed batches through the same interface.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Selects the epoch (shuffle order and augmentation).
  virtual void set_epoch(int64_t epoch) = 0;
  // The next batch of the current epoch; false at its end.
  virtual bool next(Batch& batch) = 0;
  virtual int64_t num_batches() const = 0;
  virtual int64_t batch_size() const = 0;
};

class DataLoader : public BatchSource {
 public:
  // An empty `transform` passes the reader's uint8 images through. UsageError on bad options.
  DataLoader(std::shared_ptr<const Dataset> dataset, Transform transform, LoaderOptions options);
  ~DataLoader() override;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Selects the epoch (shuffle order and augmentation); stops an epoch in progress.
  void set_epoch(int64_t epoch) override;
  int64_t epoch() const { return epoch_; }

  // Restarts the current epoch from its first batch (stopping workers cleanly).
  void reset();

  // The next batch of the current epoch (the first call starts it). False at the end of the
  // epoch, and from then on until reset() or set_epoch(). An exception thrown while loading
  // or transforming a sample is rethrown here, in batch order; the epoch then ends.
  bool next(Batch& batch) override;

  int64_t num_batches() const override;
  int64_t batch_size() const override { return options_.batch_size; }
  int64_t num_samples() const;  // samples this rank sees per epoch (padding included)

  // The dataset indices this rank visits in `epoch`, in order.
  std::vector<int64_t> epoch_indices(int64_t epoch) const;

  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

  // Builds batch `b` of `indices` synchronously (what workers run); exposed for tests.
  Batch build_batch(const std::vector<int64_t>& indices, int64_t b, int64_t epoch) const;

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  std::string sample_error(int64_t index, const std::string& what) const;
  void start();
  void stop();
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  Transform transform_;
  LoaderOptions options_;
  int64_t epoch_ = 0;

  // Epoch state.
  enum class State { kIdle, kRunning, kDone };
  State state_ = State::kIdle;
  std::vector<int64_t> order_;
  int64_t batches_ = 0;
  int64_t next_to_deliver_ = 0;

  // Worker state (guarded by mutex_).
  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers wait for room in the prefetch window
  std::condition_variable ready_cv_;  // the consumer waits for its batch
  std::map<int64_t, Slot> ready_;
  int64_t next_to_claim_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace sparsevit::data
