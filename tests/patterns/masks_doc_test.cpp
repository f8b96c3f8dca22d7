// docs/masks.md's kwarg tables against the registry, the one source of the defaults: every row
// names kwargs of its mask with the registry's default, and every kwarg of every built-in mask
// has a row (`class_token` is described once, under "Rules shared by every generator").
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "patterns/mask_registry.h"
#include "util/text.h"

namespace sparsevit::patterns {
namespace {

struct DocRow {
  std::string kwarg;
  std::string default_value;  // normalised: no backticks or trailing remark; "" for "—"
  int line = 0;
};

// A markdown row's cells; `\|` inside a cell is a literal bar.
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {  // row[0] is the leading bar
    if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (row[i] == '|') {
      cells.push_back(trim(cell));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(trim(item));
  return items;
}

std::string without_backticks(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), '`'), text.end());
  return trim(text);
}

// The default as the registry writes it: "L/2 (integer division)" -> "L/2", "(required)" and
// "—" -> "" (no default), backticks dropped.
std::string normalised_default(std::string text) {
  text = without_backticks(text);
  if (!text.empty() && text.back() == ')') {
    int depth = 0;
    for (size_t i = text.size(); i-- > 0;) {
      depth += text[i] == ')' ? 1 : text[i] == '(' ? -1 : 0;
      if (depth == 0) {
        if (i == 0 || text[i - 1] == ' ') text = trim(text.substr(0, i));
        break;
      }
    }
  }
  return text == "—" ? "" : text;
}

// mask name -> the rows of its `| kwarg | default | meaning |` tables, from the section headed
// "## `name` ...".
std::map<std::string, std::vector<DocRow>> kwarg_tables(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::map<std::string, std::vector<DocRow>> tables;
  std::string mask;
  bool in_table = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.rfind("## ", 0) == 0) {
      const size_t open = line.find('`'), close = line.find('`', open + 1);
      mask = open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
      in_table = false;
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    const std::vector<std::string> cells = cells_of(line);
    if (cells.size() >= 2 && cells[0] == "kwarg" && cells[1] == "default") {
      EXPECT_FALSE(mask.empty()) << path << ":" << number << ": a kwarg table outside a mask's section";
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    EXPECT_GE(cells.size(), 2u) << path << ":" << number << ": " << line;
    if (cells.size() < 2) continue;
    // "`w_min`, `w_max` | 5, 65": one default per kwarg, in order.
    const std::vector<std::string> names = split_list(cells[0]);
    const std::vector<std::string> defaults =
        names.size() == 1 ? std::vector<std::string>{cells[1]} : split_list(cells[1]);
    EXPECT_EQ(names.size(), defaults.size()) << path << ":" << number << ": " << line;
    for (size_t i = 0; i < names.size() && i < defaults.size(); ++i)
      tables[mask].push_back({without_backticks(names[i]), normalised_default(defaults[i]), number});
  }
  return tables;
}

const std::string kMasksDoc = std::string(SPARSEVIT_SOURCE_DIR) + "/docs/masks.md";

TEST(MasksDoc, NormalisesTheWaysTheTablesWriteADefault) {
  EXPECT_EQ(normalised_default("`wythoff`"), "wythoff");
  EXPECT_EQ(normalised_default("L/2 (integer division)"), "L/2");
  EXPECT_EQ(normalised_default("`ceil(sqrt(N))` (= ⌈√N⌉)"), "ceil(sqrt(N))");
  EXPECT_EQ(normalised_default("ceil(sqrt(N))"), "ceil(sqrt(N))");
  EXPECT_EQ(normalised_default("(required)"), "");
  EXPECT_EQ(normalised_default("—"), "");
  EXPECT_EQ(cells_of("| `mode` | `strided` | `strided` \\| `fixed` |"),
            (std::vector<std::string>{"`mode`", "`strided`", "`strided` | `fixed`"}));
}

TEST(MasksDoc, KwargTablesMatchTheRegistry) {
  const auto tables = kwarg_tables(kMasksDoc);
  for (const auto& [mask, rows] : tables) {
    SCOPED_TRACE("docs/masks.md, mask '" + mask + "'");
    const MaskGenerator* generator = nullptr;
    for (const auto& g : mask_generators())
      if (g.name == mask) generator = &g;
    ASSERT_NE(generator, nullptr) << "a kwarg table for a mask the registry does not have";
    std::map<std::string, std::string> registry;
    for (const KwargDoc& k : generator->kwargs) registry[k.name] = k.default_value;
    for (const DocRow& row : rows) {
      const auto it = registry.find(row.kwarg);
      if (it == registry.end()) {
        ADD_FAILURE() << "line " << row.line << ": `" << row.kwarg << "` is not a kwarg of '" << mask << "'";
        continue;
      }
      EXPECT_EQ(row.default_value, it->second)
          << "line " << row.line << ": the default of `" << row.kwarg << "` differs from the registry's "
          << "(declared in src/patterns/*_mask.cpp; `sparsevit masks --list` prints it)";
    }
  }
  for (const auto& g : mask_generators()) {
    const auto table = tables.find(g.name);
    ASSERT_NE(table, tables.end()) << "docs/masks.md has no kwarg table for mask '" << g.name << "'";
    for (const KwargDoc& k : g.kwargs) {
      if (k.name == "class_token") continue;  // documented once for every generator
      bool documented = false;
      for (const DocRow& row : table->second) documented = documented || row.kwarg == k.name;
      EXPECT_TRUE(documented) << "docs/masks.md's table for '" << g.name << "' has no row for `" << k.name << "`";
    }
  }
}

}  // namespace
}  // namespace sparsevit::patterns
