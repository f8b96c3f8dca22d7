#include "pipelines/policy_probe.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "episodes/demonstrations.h"
#include "pipelines/policy_checkpoint.h"
#include "pipelines/policy_train.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"

namespace sparsevit::pipelines {
namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && (a == b || std::filesystem::equivalent(a, b, ec));
}

}  // namespace

policy::ImageProbeResult run_policy_probe(const std::string& checkpoint, const std::string& data_path,
                                          policy::ImageProbeOptions options, policy::BlockPoseProbeOptions block_pose,
                                          const std::string& output) {
  const train::LoadedCheckpoint ckpt(checkpoint);
  auto model = load_checkpoint_policy(ckpt);  // the EMA weights, as evaluation uses
  auto demos = std::make_shared<episodes::EpisodeSet>(episodes::read_demonstrations(data_path));
  const int64_t n = demos->episodes();
  // What the run trained on: its config's demonstrations and --max_train_samples (0: all).
  const nlohmann::json meta = nlohmann::json::parse(ckpt.metadata_json(), nullptr, /*allow_exceptions=*/false);
  const nlohmann::json config = meta.is_object() ? meta.value("config", nlohmann::json::object()) : nlohmann::json::object();
  const bool same_demos = same_file(config.value("data_path", std::string()), data_path);
  const int64_t trained = config.value("max_train_samples", int64_t{0});
  if (options.first_episode < 0 && same_demos && trained > 0 && trained < n) options.first_episode = trained;
  const int64_t first = policy::probe_first_episode(n, options.first_episode);
  const bool held_out = !same_demos || (trained > 0 && first >= trained);
  const policy::ImageProbeResult r = policy::probe_images(*model, demos, options, held_out);
  std::cout << r.to_table() << std::endl;
  nlohmann::json j = r.to_json();
  if (block_pose.max_fit_frames > 0) {
    block_pose.first_episode = first;
    const policy::BlockPoseProbeResult p = policy::probe_block_pose(*model, *demos, block_pose);
    std::cout << p.to_table() << std::endl;
    j["block_pose"] = p.to_json();
  }
  if (!output.empty()) write_file_atomically(output, j.dump(2) + "\n");
  return r;
}

}  // namespace sparsevit::pipelines
