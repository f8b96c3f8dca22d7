// A test fixture for end-to-end training runs: a temporary folder with the synthetic two-class
// IDX dataset (synthetic_idx.h) and a small recipe on it. Suites choose the split sizes and the
// model; runs write under root_.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "pipelines/train_config.h"
#include "support/synthetic_idx.h"

namespace sparsevit::testing {

class SyntheticTrainingTest : public ::testing::Test {
 protected:
  SyntheticTrainingTest(std::string model, int train_images, int num_workers)
      : model_(std::move(model)), train_images_(train_images), num_workers_(num_workers) {}

  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("sparsevit_" + model_ + "_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "data");
    write_synthetic_idx(root_ / "data", "train", train_images_, 1);
    write_synthetic_idx(root_ / "data", "t10k", 64, 2);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // Two epochs of batch 32, lr 3e-3 with half an epoch of warm-up, no drop-path, 2 threads;
  // output under root_/out ("" : nothing written).
  pipelines::TrainConfig config(const std::string& out) const {
    pipelines::TrainConfig c;
    c.dataset = "mnist";
    c.data_path = (root_ / "data").string();
    c.model = model_;
    c.epochs = 2;
    c.batch_size = 32;
    c.lr = 3e-3;
    c.warmup_epochs = 0.5;
    c.drop_path = 0.0;
    c.num_workers = num_workers_;
    c.threads = 2;
    c.output_dir = out.empty() ? "" : (root_ / out).string();
    return c;
  }

  std::filesystem::path root_;

 private:
  std::string model_;
  int train_images_, num_workers_;
};

}  // namespace sparsevit::testing
