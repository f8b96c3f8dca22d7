// The loader's distributed sampling as data parallelism needs it: W ranks x batch B see exactly
// the global batches of one process with batch B·W (same samples, same augmentation), and the
// evaluation shards cover every sample once.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/random.h"

namespace sparsevit::data {
namespace {

class Numbers : public Dataset {
 public:
  explicit Numbers(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    return {at::full({1, 2, 2}, static_cast<uint8_t>(i % 251), at::TensorOptions().dtype(at::kByte)), i % 3};
  }
  int64_t num_classes() const override { return 3; }
  int64_t channels() const override { return 1; }
  std::string describe() const override { return "numbers"; }

 private:
  int64_t n_;
};

// A random augmentation: adds the first draw of the sample's generator to every pixel.
Transform noisy() {
  return [](const at::Tensor& image, Rng& rng) { return image.to(at::kFloat) + static_cast<float>(uniform01(rng)); };
}

std::vector<Batch> epoch(DataLoader& loader, int64_t e) {
  loader.set_epoch(e);
  std::vector<Batch> batches;
  Batch b;
  while (loader.next(b)) batches.push_back(b);
  return batches;
}

TEST(DistributedSampler, RanksTogetherMakeTheGlobalBatchesOfOneProcess) {
  for (const int64_t n : {64, 70}) {  // 70: a last, smaller batch
    auto ds = std::make_shared<Numbers>(n);
    for (const int64_t world : {2, 4}) {
      const int64_t b = 4;
      LoaderOptions one;
      one.batch_size = b * world;
      one.shuffle = true;
      one.seed = 9;
      DataLoader single(ds, noisy(), one);
      std::vector<std::vector<Batch>> ranks;
      for (int64_t r = 0; r < world; ++r) {
        LoaderOptions o = one;
        o.batch_size = b;
        o.rank = r;
        o.world_size = world;
        DataLoader loader(ds, noisy(), o);
        ranks.push_back(epoch(loader, 3));
      }
      const std::vector<Batch> global = epoch(single, 3);
      if (n % world != 0) continue;  // padding adds repeats that one process does not see
      for (int64_t r = 0; r < world; ++r) ASSERT_EQ(ranks[static_cast<std::size_t>(r)].size(), global.size());
      for (std::size_t k = 0; k < global.size(); ++k) {
        std::multiset<int64_t> expected(global[k].indices.begin(), global[k].indices.end()), got;
        std::vector<at::Tensor> images;
        for (int64_t r = 0; r < world; ++r) {
          const Batch& part = ranks[static_cast<std::size_t>(r)][k];
          got.insert(part.indices.begin(), part.indices.end());
          // Same sample, same augmentation whichever rank builds it.
          for (std::size_t j = 0; j < part.indices.size(); ++j) {
            const auto pos = std::find(global[k].indices.begin(), global[k].indices.end(), part.indices[j]) -
                             global[k].indices.begin();
            EXPECT_TRUE(at::equal(part.images[static_cast<int64_t>(j)], global[k].images[pos]));
          }
          // Every rank's batch k has the same size (the mean of the ranks' means is the global mean).
          EXPECT_EQ(part.indices.size(), ranks[0][k].indices.size());
        }
        EXPECT_EQ(got, expected) << "batch " << k << " world " << world << " n " << n;
      }
    }
  }
}

TEST(DistributedSampler, EvaluationShardsCoverEverySampleOnce) {
  auto ds = std::make_shared<Numbers>(11);
  std::multiset<int64_t> all;
  int64_t total = 0;
  for (int64_t r = 0; r < 3; ++r) {
    LoaderOptions o;
    o.batch_size = 2;
    o.rank = r;
    o.world_size = 3;
    o.even_shards = false;
    DataLoader loader(ds, nullptr, o);
    EXPECT_EQ(loader.num_samples(), r < 2 ? 4 : 3);
    for (const Batch& b : epoch(loader, 0)) all.insert(b.indices.begin(), b.indices.end());
    total += loader.num_samples();
  }
  EXPECT_EQ(total, 11);
  EXPECT_EQ(all.size(), 11u);
  for (int64_t i = 0; i < 11; ++i) EXPECT_EQ(all.count(i), 1u);
  // More ranks than samples: the extra ranks get nothing, and that is fine.
  LoaderOptions o;
  o.rank = 5;
  o.world_size = 8;
  o.even_shards = false;
  EXPECT_EQ(DataLoader(std::make_shared<Numbers>(3), nullptr, o).num_batches(), 0);
}

}  // namespace
}  // namespace sparsevit::data
