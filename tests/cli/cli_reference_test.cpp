// docs/cli.md is `sparsevit help-markdown`'s output: the committed page must be current, the
// generator must reach every command and option --help shows (nested `policy` commands too), and
// it must not depend on the terminal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"

namespace {

using namespace sparsevit::testing;

const std::string kRegenerate = "regenerate it with: build/sparsevit help-markdown > docs/cli.md";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The names under "Subcommands:" in a --help text.
std::vector<std::string> help_subcommands(const std::string& help) {
  std::vector<std::string> names;
  bool in_section = false;
  for (const std::string& line : lines_of(help)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_section = true;
      continue;
    }
    if (!in_section) continue;
    if (line.empty() || line[0] != ' ') break;
    std::stringstream words(line);
    std::string name;
    words >> name;
    names.push_back(name);
  }
  return names;
}

// The first spelling of every option line of a --help text ("  --data-path,--data_path TEXT").
std::vector<std::string> help_options(const std::string& help) {
  std::vector<std::string> names;
  for (const std::string& line : lines_of(help)) {
    if (line.rfind("  -", 0) != 0) continue;
    std::stringstream words(line);
    std::string first;
    words >> first;
    names.push_back(first.substr(0, first.find(',')));
  }
  return names;
}

// Every command --help lists has a section, and every option its --help shows is in it.
void expect_documented(const std::string& markdown, const std::string& command) {
  const Result help = run(command + " --help");
  ASSERT_EQ(help.exit_code, 0) << help.describe();
  const std::string heading = "## `sparsevit" + (command.empty() ? "" : " " + command) + "`\n";
  const std::size_t section = markdown.find(heading);
  ASSERT_NE(section, std::string::npos) << "no section " << heading;
  const std::size_t next = markdown.find("\n## ", section + heading.size());
  const std::string body = markdown.substr(section, next == std::string::npos ? std::string::npos : next - section);
  for (const std::string& option : help_options(help.out))
    EXPECT_NE(body.find("`" + option + "`"), std::string::npos) << option << " of `sparsevit " << command << "`";
  for (const std::string& sub : help_subcommands(help.out))
    expect_documented(markdown, command.empty() ? sub : command + " " + sub);
}

TEST(CliReference, DocsCliMdIsTheCurrentOutput) {
  const Result r = run("help-markdown");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string committed = slurp(kSourceDir + "/docs/cli.md");
  ASSERT_FALSE(committed.empty()) << "docs/cli.md is missing; " << kRegenerate;
  if (committed == r.out) return;
  const auto want = lines_of(r.out), have = lines_of(committed);
  std::size_t line = 0;
  while (line < want.size() && line < have.size() && want[line] == have[line]) ++line;
  FAIL() << "docs/cli.md is not the output of `sparsevit help-markdown` (first difference at line " << line + 1
         << ")\n  docs/cli.md: " << (line < have.size() ? have[line] : "<end of file>")
         << "\n  generated:   " << (line < want.size() ? want[line] : "<end of output>") << "\n"
         << kRegenerate;
}

TEST(CliReference, CoversEveryCommandAndOptionOfHelp) {
  const Result r = run("help-markdown");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_documented(r.out, "");
  EXPECT_NE(r.out.find("## Models"), std::string::npos);
  EXPECT_NE(r.out.find("`vit_nano_patch4_28`"), std::string::npos);
}

TEST(CliReference, HiddenFromHelpAndIndependentOfTheEnvironment) {
  const Result help = run("--help");
  ASSERT_EQ(help.exit_code, 0) << help.describe();
  EXPECT_EQ(help.out.find("help-markdown"), std::string::npos) << help.out;
  const Result plain = run("help-markdown");
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  // A narrow terminal's width and another working directory change nothing.
  ::setenv("COLUMNS", "20", 1);
  const Result narrow = run("help-markdown", "/");
  ::unsetenv("COLUMNS");
  EXPECT_EQ(plain.out, narrow.out);
}

}  // namespace
