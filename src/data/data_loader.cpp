#include "data/data_loader.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>

#include "util/errors.h"

#if defined(SPARSEVIT_DATA_OPENMP) && __has_include(<omp.h>)
#include <omp.h>
#define SPARSEVIT_DATA_HAVE_OMP 1
#endif

namespace sparsevit::data {

namespace {

std::string shape_text(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

// Worker threads transform small images: LibTorch's intra-op pool would only add contention
// (and, with OpenMP, every worker thread would start a team as large as the main one's).
// LibTorch's own per-thread initialisation runs first, so it cannot undo the setting later.
void single_threaded_ops_in_this_thread() {
  (void)at::get_num_threads();
#ifdef SPARSEVIT_DATA_HAVE_OMP
  omp_set_num_threads(1);
#endif
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, Transform transform, LoaderOptions options)
    : dataset_(std::move(dataset)), transform_(std::move(transform)), options_(options) {
  if (!dataset_) throw UsageError("DataLoader: null dataset");
  if (options_.batch_size < 1) throw UsageError("batch size must be >= 1, got " + std::to_string(options_.batch_size));
  if (options_.num_workers < 0) throw UsageError("num_workers must be >= 0");
  if (options_.prefetch_batches < 1) throw UsageError("prefetch_batches must be >= 1");
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    throw UsageError("rank " + std::to_string(options_.rank) + " is not in [0, world_size " +
                     std::to_string(options_.world_size) + ")");
  }
  if (dataset_->size() < 1) throw UsageError("DataLoader: empty dataset (" + dataset_->describe() + ")");
}

DataLoader::~DataLoader() { stop(); }

int64_t DataLoader::num_samples() const {
  const int64_t n = dataset_->size(), world = options_.world_size;
  if (!options_.even_shards) return (n - options_.rank + world - 1) / world;  // positions r, r + W, ... < n
  // torch.utils.data.DistributedSampler's num_samples.
  if (options_.drop_last && n % world != 0) return n / world;
  return (n + world - 1) / world;
}

int64_t DataLoader::num_batches() const {
  const int64_t n = num_samples(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_indices(int64_t epoch) const {
  const int64_t n = dataset_->size();
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) {
    Rng rng = make_rng(options_.seed, RngStream::kShuffle, epoch);
    fisher_yates(order, rng);
  }
  const int64_t world = options_.world_size, per_rank = num_samples();
  const int64_t total = options_.even_shards ? per_rank * world : n;
  // Pad by repeating the order from its start (or cut, with drop_last) to total.
  std::vector<int64_t> padded;
  padded.reserve(static_cast<std::size_t>(total));
  for (int64_t i = 0; i < total; ++i) padded.push_back(order[static_cast<std::size_t>(i % n)]);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank));
  for (int64_t i = options_.rank; i < total; i += world) mine.push_back(padded[static_cast<std::size_t>(i)]);
  return mine;
}

std::string DataLoader::sample_error(int64_t index, const std::string& what) const {
  // Keep the first line: LibTorch appends a C++ backtrace to its messages.
  return "sample " + std::to_string(index) + " of " + dataset_->describe() + ": " + what.substr(0, what.find('\n'));
}

Batch DataLoader::build_batch(const std::vector<int64_t>& indices, int64_t b, int64_t epoch) const {
  at::NoGradGuard no_grad;
  const int64_t begin = b * options_.batch_size;
  const int64_t end = std::min<int64_t>(begin + options_.batch_size, static_cast<int64_t>(indices.size()));
  if (begin < 0 || begin >= end) throw RuntimeError("batch " + std::to_string(b) + " is out of range");
  Batch batch;
  std::vector<at::Tensor> images;
  std::vector<int64_t> labels;
  images.reserve(static_cast<std::size_t>(end - begin));
  for (int64_t p = begin; p < end; ++p) {
    const int64_t index = indices[static_cast<std::size_t>(p)];
    at::Tensor image;
    int64_t label = 0;
    try {
      Rng rng = make_rng(options_.seed, RngStream::kSample, epoch, index);
      Sample sample = dataset_->get(index, rng);
      label = sample.label;
      if (transform_) {
        image = transform_(sample.image, rng);
      } else {
        image = std::move(sample.image);
      }
    } catch (const UsageError&) {
      throw;
    } catch (const RuntimeError&) {
      throw;  // the readers' errors already name the file
    } catch (const c10::Error& e) {
      throw RuntimeError(sample_error(index, e.what_without_backtrace()));
    } catch (const std::exception& e) {
      // LibTorch errors (std::runtime_error in some builds) and the like: say which sample.
      throw RuntimeError(sample_error(index, e.what()));
    }
    if (!images.empty() && image.sizes() != images.front().sizes()) {
      throw RuntimeError("sample " + std::to_string(index) + " of " + dataset_->describe() + " has shape " +
                         shape_text(image) + " but the batch started with " + shape_text(images.front()) +
                         " (resize or crop images to one size in the transform)");
    }
    images.push_back(std::move(image));
    labels.push_back(label);
    batch.indices.push_back(index);
  }
  batch.images = at::stack(images);
  batch.labels = at::tensor(labels, at::TensorOptions().dtype(at::kLong));
  return batch;
}

void DataLoader::set_epoch(int64_t epoch) {
  stop();
  epoch_ = epoch;
  state_ = State::kIdle;
}

void DataLoader::reset() {
  stop();
  state_ = State::kIdle;
}

void DataLoader::start() {
  stop();
  order_ = epoch_indices(epoch_);
  batches_ = num_batches();
  next_to_deliver_ = 0;
  next_to_claim_ = 0;
  state_ = State::kRunning;
  const int64_t workers = std::min(options_.num_workers, batches_);
  for (int64_t w = 0; w < workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

void DataLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.clear();
  stopping_ = false;
}

void DataLoader::worker_loop() {
  single_threaded_ops_in_this_thread();
  const int64_t window = options_.prefetch_batches * options_.num_workers;
  while (true) {
    int64_t b = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] {
        return stopping_ || next_to_claim_ >= batches_ || next_to_claim_ < next_to_deliver_ + window;
      });
      if (stopping_ || next_to_claim_ >= batches_) return;
      b = next_to_claim_++;
    }
    Slot slot;
    try {
      slot.batch = build_batch(order_, b, epoch_);
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_[b] = std::move(slot);
    }
    ready_cv_.notify_all();
  }
}

bool DataLoader::next(Batch& batch) {
  if (state_ == State::kIdle) start();
  if (state_ == State::kDone) return false;
  if (next_to_deliver_ >= batches_) {
    state_ = State::kDone;
    stop();
    return false;
  }
  Slot slot;
  if (workers_.empty()) {
    try {
      slot.batch = build_batch(order_, next_to_deliver_, epoch_);
    } catch (...) {
      slot.error = std::current_exception();
    }
    ++next_to_deliver_;
  } else {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_cv_.wait(lock, [&] { return ready_.count(next_to_deliver_) > 0; });
      auto it = ready_.find(next_to_deliver_);
      slot = std::move(it->second);
      ready_.erase(it);
      ++next_to_deliver_;
    }
    work_cv_.notify_all();
  }
  if (slot.error) {
    state_ = State::kDone;
    stop();
    std::rethrow_exception(slot.error);
  }
  batch = std::move(slot.batch);
  return true;
}

}  // namespace sparsevit::data
