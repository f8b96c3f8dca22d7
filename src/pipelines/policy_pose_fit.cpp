#include "pipelines/policy_pose_fit.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "episodes/demonstrations.h"
#include "pipelines/policy_checkpoint.h"
#include "pipelines/policy_train.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"

namespace sparsevit::pipelines {

policy::BlockPoseFitResult run_policy_pose_fit(const TrainConfig& c, policy::BlockPoseFitOptions options,
                                               const std::string& resume, const std::string& output) {
  if (c.threads > 0) at::set_num_threads(static_cast<int>(c.threads));
  const episodes::EpisodeSet demos = episodes::read_demonstrations(c.data_path);
  std::shared_ptr<policy::DiffusionPolicy> model;
  std::string source;
  if (!resume.empty()) {
    model = load_checkpoint_policy(train::LoadedCheckpoint(resume));
    // Loading draws from the global generator (the modules' init), differently for a training
    // checkpoint and its export: reseed so that the head's init depends on --seed alone.
    at::manual_seed(c.seed);
    source = resume;
  } else {
    at::manual_seed(c.seed);
    model = std::make_shared<policy::DiffusionPolicy>(policy_description(c, demos.image_height).config);
    source = "a fresh " + model->config().encoder_model + " (attention " + (c.attn_cfg.empty() ? "default" : c.attn_cfg) +
             ", " + c.obs_readout + " readout)";
  }
  if (options.first_episode < 0 && c.max_train_samples > 0 && c.max_train_samples < demos.episodes())
    options.first_episode = c.max_train_samples;
  std::cerr << fmt::format("pose-fit: {} on {}x{} frames -> {} px, {} episodes, {} steps of {} frames, {} threads\n",
                           source, demos.image_height, demos.image_width, model->image_size(), demos.episodes(),
                           options.steps, options.batch_size, at::get_num_threads());
  const auto start = std::chrono::steady_clock::now();
  const auto progress = [&](int64_t step, double loss) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << fmt::format("pose-fit [{}/{}] loss {:.4f}  {:.0f} s, ETA {:.0f} s\n", step, options.steps, loss, s,
                             s / static_cast<double>(step) * static_cast<double>(options.steps - step));
  };
  const policy::BlockPoseFitResult r =
      policy::fit_block_pose(*model, demos, options, progress, std::max<int64_t>(1, options.steps / 20));
  std::cout << r.to_table() << std::endl;
  if (!output.empty()) {
    nlohmann::json j = r.to_json();
    j["source"] = source;
    j["data_path"] = c.data_path;
    j["image_size"] = model->image_size();
    j["first_episode"] = options.first_episode;
    write_file_atomically(output, j.dump(2) + "\n");
  }
  return r;
}

}  // namespace sparsevit::pipelines
