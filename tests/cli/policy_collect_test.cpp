// `sparsevit policy collect` end to end: a readable .episodes file with the expert's episodes,
// the progress and summary lines, and one-line usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_runner.h"
#ifdef SPARSEVIT_TEST_HAVE_EPISODES
#include "episodes/episode_file.h"
#endif

namespace {

namespace fs = std::filesystem;
using namespace sparsevit::testing;

bool has_policy_command() { return run("policy --help").exit_code == 0; }

TEST(CliPolicyCollect, WritesAnEpisodesFile) {
  if (!has_policy_command()) GTEST_SKIP() << "sparsevit built without envs (Box2D)";
  TempDir dir;
  const std::string out = (dir.path() / "demo.episodes").string();
  const Result r = run("policy collect --episodes 2 --seed 5 --image_size 16 --threads 2 --output " + quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string bytes = slurp(out);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), "SVEPISOD");
  EXPECT_NE(r.out.find("2 episodes"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("expert success rate : 100.0%"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("mean episode length"), std::string::npos) << r.describe();
#ifdef SPARSEVIT_TEST_HAVE_EPISODES
  const sparsevit::episodes::EpisodeSet set = sparsevit::episodes::read_episode_file(out);
  EXPECT_EQ(set.episodes(), 2);
  EXPECT_EQ(set.task, "pusht");
  EXPECT_EQ(set.image_height, 16);
  EXPECT_EQ(set.state_dim, 5);
  EXPECT_EQ(set.action_dim, 2);
  EXPECT_NE(r.out.find(std::to_string(set.steps()) + " steps"), std::string::npos) << r.describe();
#endif
  // No temporary left beside it.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
}

TEST(CliPolicyCollect, PrintsProgressEveryTenEpisodes) {
  if (!has_policy_command()) GTEST_SKIP() << "sparsevit built without envs (Box2D)";
  TempDir dir;
  const Result r = run("policy collect --episodes 10 --image-size 4 --all --output " +
                       quote((dir.path() / "d.episodes").string()));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("collect: 10 episodes run"), std::string::npos) << r.describe();
}

TEST(CliPolicyCollect, BadFlagsAreOneLineUsageErrors) {
  if (!has_policy_command()) GTEST_SKIP() << "sparsevit built without envs (Box2D)";
  TempDir dir;
  const std::string out = quote((dir.path() / "x.episodes").string());
  expect_usage_error(run("policy collect --output " + out), "--episodes");
  expect_usage_error(run("policy collect --episodes 2"), "--output");
  expect_usage_error(run("policy collect --episodes 0 --output " + out), "episodes");
  expect_usage_error(run("policy collect --episodes 2 --image_size 0 --output " + out), "image");
  expect_usage_error(run("policy collect --episodes 2 --threads -1 --output " + out), "threads");
  expect_usage_error(run("policy collect --episodes 2 --bogus --output " + out), "bogus");
  expect_usage_error(run("policy"));
  EXPECT_FALSE(fs::exists(dir.path() / "x.episodes"));
}

TEST(CliPolicyCollect, AnUnwritableOutputIsARuntimeError) {
  if (!has_policy_command()) GTEST_SKIP() << "sparsevit built without envs (Box2D)";
  TempDir dir;
  const Result r = run("policy collect --episodes 1 --image_size 4 --output " +
                       quote((dir.path() / "missing" / "d.episodes").string()));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.stderr_lines(), 1) << r.describe();
}

}  // namespace
