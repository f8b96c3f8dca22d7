// `sparsevit policy collect`: runs the scripted PushT expert on consecutive seeds and writes
// what it saw and did as a .episodes file (recording conventions in docs/policy.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "envs/pusht_demonstrations.h"
#include "episodes/episode_file.h"
#include "runtime/cpu_threads.h"

namespace sparsevit::cli {
namespace {

struct CollectOptions {
  envs::DemonstrationOptions demo;
  std::string output;
  bool all = false;
  std::string expert = "smooth";
  int threads = 0;  // 0: every core
};

inline constexpr int kProgressEvery = 10;

void run_collect(const CollectOptions& o) {
  envs::DemonstrationOptions demo = o.demo;
  demo.successful_only = !o.all;
  // Validated by the option's check: "smooth" is the default config.
  if (o.expert == "waypoints") demo.expert = envs::PushTExpertConfig::waypoints();
  demo.threads = static_cast<int>(runtime::resolve_cpu_threads(o.threads));
  const auto progress = [](const envs::DemonstrationProgress& p) {
    if (p.episodes_run % kProgressEvery != 0) return;
    fmt::print("collect: {} episodes run (seeds to {}), {} kept, expert success {:.1f}%, {} steps, {:.1f} s\n",
               p.episodes_run, p.last_seed, p.episodes_kept, 100.0 * p.successes / p.episodes_run, p.steps_kept,
               p.seconds);
    std::fflush(stdout);
  };
  envs::DemonstrationProgress total;
  const episodes::EpisodeSet set = envs::collect_pusht_demonstrations(demo, progress, &total);
  episodes::write_episode_file(o.output, set);
  fmt::print("wrote {}: {} episodes, {} steps, images {}x{}\n", o.output, set.episodes(), set.steps(),
             set.image_height, set.image_width);
  fmt::print("expert success rate : {:.1f}% ({} of {} episodes, seeds {}..{})\n",
             100.0 * total.successes / total.episodes_run, total.successes, total.episodes_run, demo.first_seed,
             total.last_seed);
  fmt::print("mean episode length : {:.1f} steps\n", static_cast<double>(set.steps()) / set.episodes());
  fmt::print("time                : {:.1f} s ({:.0f} steps/s, {} threads)\n", total.seconds,
             set.steps() / std::max(total.seconds, 1e-9), demo.threads);
}

}  // namespace

void add_policy_collect_command(CLI::App* policy) {
  auto o = std::make_shared<CollectOptions>();
  CLI::App* cmd = policy->add_subcommand("collect", "Scripted-expert PushT demonstrations to a .episodes file");
  cmd->add_option(option_names("episodes"), o->demo.episodes, "episodes to collect (successful ones unless --all)")
      ->required()
      ->check(CLI::PositiveNumber);
  add_named_option(cmd, "seed", o->demo.first_seed, "first seed (then seed + 1, ...)");
  add_named_option(cmd, "image-size", o->demo.image_size, "observation image side in pixels")->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("output"), o->output, "output file (.episodes)")->required();
  cmd->add_flag(option_names("all"), o->all, "keep the episodes the expert fails too");
  cmd->add_option(option_names("expert"), o->expert,
                  "smooth: commands within 30 px of the agent, a function of the state alone; waypoints: the "
                  "expert before issue #32 (waypoints up to ~75 px ahead, contact hysteresis)")
      ->check(CLI::IsMember({"smooth", "waypoints"}))
      ->capture_default_str();
  add_named_option(cmd, "threads", o->threads, "episodes run at once (0: every core)")->check(CLI::NonNegativeNumber);
  cmd->callback([o] { run_collect(*o); });
}

}  // namespace sparsevit::cli
