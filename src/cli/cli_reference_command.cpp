// `sparsevit help-markdown`: the command-line reference (docs/cli.md) written from CLI11's own
// App and Option objects, so the page cannot drift from what the binary parses. Hidden from
// --help (empty group). The output depends on nothing but the registered commands, models and
// attention backends: no terminal width, no wrapping, no machine-dependent defaults.
#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/attention_backends.h"
#include "models/model_shapes.h"
#ifdef SPARSEVIT_HAVE_TRAIN
#include "models/mae_registry.h"
#endif

namespace sparsevit::cli {
namespace {

// A Markdown table cell: pipes escaped, line breaks joined, so one option stays one row.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string code(const std::string& text) { return text.empty() ? "" : "`" + cell(text) + "`"; }

// "--data-path, --data_path": every spelling CLI11 accepts (positionals by their name).
std::string option_spellings(const CLI::Option* opt) {
  std::string names = opt->get_name(/*positional=*/true, /*all_options=*/true);
  std::string out;
  std::stringstream split(names);
  for (std::string name; std::getline(split, name, ',');) out += (out.empty() ? "" : ", ") + code(name);
  return out;
}

// What the value is, as --help shows it: CLI11's type name (validators included), "..." for
// repeatable values, "REQUIRED"; "flag" for flags.
// The default as --help shows it; an empty list reads "[]" with CLI11 2.3 (Debian 12) and "{}" with
// 2.4 (Debian 13): one spelling, so docs/cli.md is the same on both.
std::string option_default(const CLI::Option* opt) {
  const std::string text = opt->get_default_str();
  return text == "{}" ? "[]" : text;
}

std::string option_value(const CLI::Option* opt) {
  if (!opt->get_option_text().empty()) return opt->get_option_text();
  std::string value = opt->get_type_size() == 0 ? "" : opt->get_type_name();
  if (value.empty()) return "flag";  // --help shows no value for it
  if (opt->get_expected_max() == CLI::detail::expected_max_vector_size)
    value += " ...";
  else if (opt->get_expected_min() > 1)
    value += " x " + std::to_string(opt->get_expected());
  if (opt->get_required()) value += " REQUIRED";
  return value;
}

std::string option_relations(const CLI::Option* opt) {
  std::string out;
  for (const CLI::Option* needed : opt->get_needs()) out += " Needs " + code(needed->get_name());
  for (const CLI::Option* excluded : opt->get_excludes()) out += " Excludes " + code(excluded->get_name());
  return out;
}

// Options shown by --help (a non-empty group), the app's own and those of its option groups
// (nameless sub-apps), grouped as --help groups them.
void collect_options(const CLI::App* app, std::vector<const CLI::Option*>& options) {
  for (const CLI::Option* opt : app->get_options([](const CLI::Option* o) { return !o->get_group().empty(); }))
    options.push_back(opt);
  for (const CLI::App* group : app->get_subcommands([](const CLI::App* a) { return a->get_name().empty(); }))
    collect_options(group, options);
}

void write_options(std::ostream& out, const CLI::App* app) {
  std::vector<const CLI::Option*> options;
  collect_options(app, options);
  std::vector<std::string> groups;
  for (const CLI::Option* opt : options)
    if (std::find(groups.begin(), groups.end(), opt->get_group()) == groups.end()) groups.push_back(opt->get_group());
  for (const std::string& group : groups) {
    if (groups.size() > 1 || group != "Options") out << "*" << group << "*\n\n";
    out << "| option | value | default | help |\n|---|---|---|---|\n";
    for (const CLI::Option* opt : options) {
      if (opt->get_group() != group) continue;
      out << "| " << option_spellings(opt) << " | " << code(option_value(opt)) << " | " << code(option_default(opt))
          << " | " << cell(opt->get_description()) << option_relations(opt) << " |\n";
    }
    out << "\n";
  }
}

// GitHub's anchor of the heading "## `sparsevit policy train`": sparsevit-policy-train.
std::string anchor(std::string command_path) {
  std::replace(command_path.begin(), command_path.end(), ' ', '-');
  return command_path;
}

std::vector<const CLI::App*> visible_subcommands(const CLI::App* app) {
  return app->get_subcommands([](const CLI::App* a) { return !a->get_name().empty() && !a->get_group().empty(); });
}

// One section per command, depth first in registration order: `sparsevit policy train` after
// `sparsevit policy`.
void write_command(std::ostream& out, const CLI::App* app, const std::string& path) {
  out << "## `" << path << "`\n\n";
  if (!app->get_description().empty()) out << cell(app->get_description()) << "\n\n";
  const auto subcommands = visible_subcommands(app);
  if (!subcommands.empty()) {
    out << "Subcommands: ";
    for (std::size_t i = 0; i < subcommands.size(); ++i)
      out << (i ? ", " : "") << "[`" << subcommands[i]->get_name() << "`](#"
          << anchor(path + " " + subcommands[i]->get_name()) << ")";
    out << ".\n\n";
  }
  write_options(out, app);
  for (const CLI::App* sub : subcommands) write_command(out, sub, path + " " + sub->get_name());
}

void write_models(std::ostream& out) {
  out << "## Models\n\n"
      << "The names `--model` takes (the registry, `src/models/model_shapes.cpp`). N counts the tokens of one "
         "image or frame, the class token included.\n\n"
      << "| model | input | patch | width | depth | heads | N | frames | what |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const models::ModelShape& s : models::model_shapes())
    out << "| `" << s.name << "` | " << s.image_size << " | " << s.patch_size << " | " << s.embed_dim << " | " << s.depth
        << " | " << s.num_heads << " | " << s.num_tokens() << " | " << (s.is_video() ? std::to_string(s.num_frames) : "")
        << " | " << cell(s.summary) << " |\n";
  out << "\nAliases (MAE's names): ";
  bool first = true;
  for (const auto& [alias, target] : models::model_aliases()) {
    out << (first ? "" : ", ") << "`" << alias << "` = `" << target << "`";
    first = false;
  }
  out << ".\n";
#ifdef SPARSEVIT_HAVE_TRAIN
  out << "\nMAE pretraining models (`sparsevit pretrain --model`, `src/models/mae_registry.cpp`): ";
  first = true;
  for (const std::string& name : models::mae_model_names()) {
    out << (first ? "" : ", ") << "`" << name << "`";
    first = false;
  }
  out << ".\n";
#endif
}

void write_backends(std::ostream& out) {
  out << "\n## Attention backends\n\n"
      << "The names an attention config's `backend:` takes (`src/config/attention_backends.cpp`), with their "
         "`backend_kwargs` and defaults. The masks of backends `vit` and `topk` and their `mask_kwargs`: "
         "`sparsevit masks --list` and [masks.md](masks.md).\n\n"
      << "| backend | what | backend_kwargs (default): meaning |\n|---|---|---|\n";
  for (const config::AttentionBackend& backend : config::attention_backends()) {
    std::string kwargs;
    for (const patterns::KwargDoc& k : backend.kwargs)
      kwargs += (kwargs.empty() ? "" : "; ") + code(k.name) +
                (k.default_value.empty() ? "" : " (" + code(k.default_value) + ")") + ": " + cell(k.doc);
    if (kwargs.empty()) kwargs = backend.takes_mask ? "none (its `mask:` has `mask_kwargs`)" : "none";
    out << "| `" << backend.name << "` | " << cell(backend.summary) << " | " << kwargs << " |\n";
  }
}

void write_cli_reference(std::ostream& out, const CLI::App& root) {
  out << "# Command-line reference\n\n"
      << "Generated by `sparsevit help-markdown > docs/cli.md` from the binary's own option lists; do not edit "
         "(tests/cli/cli_reference_test.cpp fails when it is not current). A repeated option keeps its last "
         "value. Exit codes: 0 success, 2 usage or configuration error (one line on stderr), 1 runtime "
         "error.\n\n";
  const std::string name = "sparsevit";
  out << "Commands: ";
  const auto commands = visible_subcommands(&root);
  for (std::size_t i = 0; i < commands.size(); ++i)
    out << (i ? ", " : "") << "[`" << commands[i]->get_name() << "`](#" << anchor(name + " " + commands[i]->get_name())
        << ")";
  out << "; [models](#models), [attention backends](#attention-backends).\n\n";
  out << "## `" << name << "`\n\n" << cell(root.get_description()) << "\n\n";
  write_options(out, &root);
  for (const CLI::App* sub : commands) write_command(out, sub, name + " " + sub->get_name());
  write_models(out);
  write_backends(out);
}

}  // namespace

void register_cli_reference_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("help-markdown", "Print the command-line reference (docs/cli.md) as Markdown");
  cmd->group("");  // hidden from --help: a maintainer's tool
  const CLI::App* root = &app;
  cmd->callback([root] { write_cli_reference(std::cout, *root); });
}

}  // namespace sparsevit::cli
