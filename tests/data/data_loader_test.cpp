#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "data/data_loader.h"
#include "data/transforms.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::expect_error;

// Sample i: a 3x6x6 image of pseudo-random bytes seeded by i, label i % 5. Optionally
// throws for one index, or sleeps to make workers race.
class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(int64_t n, int64_t throw_at = -1, int sleep_us = 0)
      : n_(n), throw_at_(throw_at), sleep_us_(sleep_us) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    check_index(*this, i);
    if (i == throw_at_) throw RuntimeError("cannot read sample " + std::to_string(i) + " (test)");
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    at::Tensor img = at::empty({3, 6, 6}, at::TensorOptions().dtype(at::kByte));
    Rng rng(static_cast<uint64_t>(i) + 1000);
    uint8_t* p = img.data_ptr<uint8_t>();
    for (int64_t k = 0; k < img.numel(); ++k) p[k] = static_cast<uint8_t>(rng() & 0xFF);
    p[0] = static_cast<uint8_t>(i % 256);
    return {img, i % 5};
  }
  int64_t num_classes() const override { return 5; }
  int64_t channels() const override { return 3; }
  std::string describe() const override { return "synthetic"; }

 private:
  int64_t n_, throw_at_;
  int sleep_us_;
};

// Chained LoaderOptions setters (designated initialisers are C++20).
struct Opt {
  LoaderOptions o;
  Opt& batch(int64_t v) { o.batch_size = v; return *this; }
  Opt& shuffle(bool v) { o.shuffle = v; return *this; }
  Opt& drop_last(bool v) { o.drop_last = v; return *this; }
  Opt& workers(int64_t v) { o.num_workers = v; return *this; }
  Opt& seed(uint64_t v) { o.seed = v; return *this; }
  Opt& prefetch(int64_t v) { o.prefetch_batches = v; return *this; }
  Opt& rank(int64_t v) { o.rank = v; return *this; }
  Opt& world_size(int64_t v) { o.world_size = v; return *this; }
  operator LoaderOptions() const { return o; }  // NOLINT: implicit by design
};

Transform augment() {
  return compose({[](const at::Tensor& x, Rng&) { return to_float(x); }, RandomResizedCrop(4, {0.3, 1.0}),
                  RandomHorizontalFlip(0.5), ColorJitter(0.4)});
}

std::vector<Batch> run_epoch(DataLoader& loader) {
  std::vector<Batch> batches;
  Batch b;
  while (loader.next(b)) batches.push_back(b);
  return batches;
}

std::vector<int64_t> visited(const std::vector<Batch>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.indices.begin(), b.indices.end());
  return out;
}

TEST(DataLoader, CoversEverySampleOnceInOrderWithoutShuffle) {
  auto ds = std::make_shared<SyntheticDataset>(23);
  for (int64_t workers : {0, 2}) {
    DataLoader loader(ds, nullptr, Opt().batch(5).workers(workers));
    EXPECT_EQ(loader.num_batches(), 5);
    const auto batches = run_epoch(loader);
    ASSERT_EQ(batches.size(), 5u);
    std::vector<int64_t> expected(23);
    std::iota(expected.begin(), expected.end(), int64_t{0});
    EXPECT_EQ(visited(batches), expected);
    EXPECT_EQ(batches.back().images.sizes(), (at::IntArrayRef{3, 3, 6, 6}));
    for (const auto& b : batches) {
      ASSERT_EQ(b.labels.scalar_type(), at::kLong);
      for (std::size_t k = 0; k < b.indices.size(); ++k) {
        EXPECT_EQ(b.labels[static_cast<int64_t>(k)].item<int64_t>(), b.indices[k] % 5);
        EXPECT_EQ(b.images[static_cast<int64_t>(k)][0][0][0].item<uint8_t>(), b.indices[k] % 256);
      }
    }
    Batch extra;
    EXPECT_FALSE(loader.next(extra));  // stays finished until reset
  }
}

TEST(DataLoader, ShuffleIsAPermutationAndDropLastDropsTheTail) {
  auto ds = std::make_shared<SyntheticDataset>(23);
  DataLoader loader(ds, augment(), Opt().batch(5).shuffle(true).workers(2).seed(3));
  auto order = visited(run_epoch(loader));
  ASSERT_EQ(order.size(), 23u);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 23; ++i) EXPECT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_FALSE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(order, loader.epoch_indices(0));

  DataLoader dropping(ds, augment(), Opt().batch(5).shuffle(true).drop_last(true).seed(3));
  EXPECT_EQ(dropping.num_batches(), 4);
  const auto batches = run_epoch(dropping);
  ASSERT_EQ(batches.size(), 4u);
  for (const auto& b : batches) EXPECT_EQ(b.images.size(0), 5);
  // Same seed, same order; the first 20 of the same permutation.
  EXPECT_EQ(visited(batches), std::vector<int64_t>(order.begin(), order.begin() + 20));
}

TEST(DataLoader, SameBatchesForAnyNumberOfWorkers) {
  auto ds = std::make_shared<SyntheticDataset>(37, -1, 200);
  std::vector<std::vector<Batch>> runs;
  for (int64_t workers : {0, 1, 2, 3}) {
    DataLoader loader(ds, augment(), Opt().batch(4).shuffle(true).workers(workers).seed(42));
    loader.set_epoch(1);
    runs.push_back(run_epoch(loader));
  }
  for (std::size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (std::size_t b = 0; b < runs[0].size(); ++b) {
      EXPECT_EQ(runs[r][b].indices, runs[0][b].indices);
      EXPECT_TRUE(at::equal(runs[r][b].images, runs[0][b].images)) << "workers run " << r << " batch " << b;
      EXPECT_TRUE(at::equal(runs[r][b].labels, runs[0][b].labels));
    }
  }
  EXPECT_EQ(runs[0][0].images.scalar_type(), at::kFloat);
  EXPECT_EQ(runs[0][0].images.sizes(), (at::IntArrayRef{4, 3, 4, 4}));
}

TEST(DataLoader, EpochsAndSeedsDiffer) {
  auto ds = std::make_shared<SyntheticDataset>(16);
  DataLoader loader(ds, augment(), Opt().batch(16).shuffle(true).workers(2).seed(1));
  const auto e0 = run_epoch(loader);
  loader.reset();
  const auto e0_again = run_epoch(loader);
  loader.set_epoch(1);
  const auto e1 = run_epoch(loader);
  EXPECT_EQ(e0[0].indices, e0_again[0].indices);
  EXPECT_TRUE(at::equal(e0[0].images, e0_again[0].images));
  EXPECT_NE(e0[0].indices, e1[0].indices);
  // Same sample, different epoch: different augmentation.
  auto image_of = [](const Batch& b, int64_t index) {
    const auto it = std::find(b.indices.begin(), b.indices.end(), index);
    return b.images[it - b.indices.begin()];
  };
  EXPECT_FALSE(at::equal(image_of(e0[0], 3), image_of(e1[0], 3)));
  DataLoader other(ds, augment(), Opt().batch(16).shuffle(true).seed(2));
  EXPECT_NE(run_epoch(other)[0].indices, e0[0].indices);
}

TEST(DataLoader, DistributedShardsAreDisjointAndPaddedEqually) {
  auto ds = std::make_shared<SyntheticDataset>(10);
  for (bool shuffle : {false, true}) {
    std::vector<std::vector<int64_t>> shards;
    for (int64_t rank = 0; rank < 3; ++rank) {
      DataLoader loader(ds, nullptr, Opt().batch(3).shuffle(shuffle).seed(5).rank(rank).world_size(3));
      EXPECT_EQ(loader.num_samples(), 4);
      EXPECT_EQ(loader.num_batches(), 2);
      shards.push_back(visited(run_epoch(loader)));
      ASSERT_EQ(shards.back().size(), 4u);
    }
    // Interleaving the shards gives the epoch order followed by its first two entries again.
    DataLoader single(ds, nullptr, Opt().batch(3).shuffle(shuffle).seed(5));
    const auto order = single.epoch_indices(0);
    std::vector<int64_t> padded = order;
    padded.push_back(order[0]);
    padded.push_back(order[1]);
    for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(shards[i % 3][i / 3], padded[i]);
    std::multiset<int64_t> all;
    for (const auto& s : shards) all.insert(s.begin(), s.end());
    for (int64_t i = 0; i < 10; ++i) EXPECT_GE(all.count(i), 1u);
    EXPECT_EQ(all.size(), 12u);
  }
  // drop_last cuts to a multiple of world_size instead.
  DataLoader cut(ds, nullptr, Opt().batch(3).drop_last(true).rank(2).world_size(3));
  EXPECT_EQ(cut.num_samples(), 3);
  EXPECT_EQ(cut.epoch_indices(0), (std::vector<int64_t>{2, 5, 8}));
}

TEST(DataLoader, SampleErrorsPropagateAndNeverHang) {
  auto ds = std::make_shared<SyntheticDataset>(40, 17);
  for (int64_t workers : {0, 1, 3}) {
    DataLoader loader(ds, augment(), Opt().batch(4).workers(workers).prefetch(2));
    Batch b;
    int delivered = 0;
    expect_error<RuntimeError>(
        [&] {
          while (loader.next(b)) ++delivered;
        },
        {"cannot read sample 17"});
    EXPECT_EQ(delivered, 4);  // batches 0..3 arrive, batch 4 holds sample 17
    EXPECT_FALSE(loader.next(b));
    loader.reset();
    ASSERT_TRUE(loader.next(b));
    EXPECT_EQ(b.indices.front(), 0);
  }
  // A transform that fails inside LibTorch is reported with the sample index.
  auto bad = [](const at::Tensor& x, Rng&) { return x.view({7, -1}); };
  DataLoader loader(std::make_shared<SyntheticDataset>(4), bad, Opt().batch(2).workers(2));
  Batch b;
  expect_error<RuntimeError>([&] { loader.next(b); }, {"sample 0 of synthetic"});
}

TEST(DataLoader, MismatchedShapesAreExplained) {
  auto ds = std::make_shared<SyntheticDataset>(4);
  auto odd = [](const at::Tensor& x, Rng& rng) { return x.slice(2, 0, 1 + randint(rng, 0, 5)); };
  DataLoader loader(ds, odd, Opt().batch(4));
  Batch b;
  expect_error<RuntimeError>([&] { loader.next(b); }, {"has shape", "resize or crop"});
}

TEST(DataLoader, DestructionMidEpochJoinsCleanly) {
  auto ds = std::make_shared<SyntheticDataset>(200, -1, 500);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    DataLoader loader(ds, augment(), Opt().batch(8).workers(3).prefetch(4));
    Batch b;
    ASSERT_TRUE(loader.next(b));
    if (i % 2) loader.set_epoch(3);  // stop, then restart lazily below
    ASSERT_TRUE(loader.next(b));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(DataLoader, WorkersRunLibTorchOpsSingleThreaded) {
  // The caller (the trainer) asks for 2 intra-op threads; workers must still use one.
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::atomic<int> max_threads{0};
  auto probe = [&max_threads](const at::Tensor& x, Rng&) {
    const int n = at::get_num_threads();
    int seen = max_threads.load();
    while (n > seen && !max_threads.compare_exchange_weak(seen, n)) {
    }
    return x;
  };
  DataLoader loader(std::make_shared<SyntheticDataset>(8), probe, Opt().batch(2).workers(2));
  const int main_threads = at::get_num_threads();
  run_epoch(loader);
  EXPECT_EQ(max_threads.load(), 1);
  EXPECT_EQ(main_threads, 2);
  EXPECT_EQ(at::get_num_threads(), main_threads);  // the caller's setting is untouched
  at::set_num_threads(before);
}

TEST(DataLoader, RejectsBadOptions) {
  auto ds = std::make_shared<SyntheticDataset>(4);
  EXPECT_THROW(DataLoader(ds, nullptr, Opt().batch(0)), UsageError);
  EXPECT_THROW(DataLoader(ds, nullptr, Opt().workers(-1)), UsageError);
  EXPECT_THROW(DataLoader(ds, nullptr, Opt().rank(2).world_size(2)), UsageError);
  EXPECT_THROW(DataLoader(nullptr, nullptr, LoaderOptions{}), UsageError);
}

}  // namespace
}  // namespace sparsevit::data
