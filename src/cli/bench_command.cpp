// `sparsevit bench`: argument parsing and printing; the measurement is benchmarks/attention_benchmark
// (one attention operator) or, with --model, benchmarks/model_benchmark (a whole model).
#include <c10/util/Exception.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/video_attention_report.h"
#include "benchmarks/attention_benchmark.h"
#include "benchmarks/model_benchmark.h"
#include "cli/commands.h"
#include "util/errors.h"

namespace sparsevit::cli {
namespace {

// The video options as `finetune` declares them (bench is built only beside the training
// pipelines: it links their engine). attention_type keeps finetune's default for --help.
struct VideoOptions {
  int64_t num_frames = 0;  // 0: the model's
  std::string attention_type = "divided_space_time";
  std::string temporal_attn_cfg;
};

// Options of one mode given in the other: the first one named, as a one-line usage error.
void refuse_options(const CLI::App* cmd, const std::vector<std::string>& names, const std::string& why) {
  for (const std::string& name : names)
    if (cmd->count(name) > 0) throw UsageError(name + " " + why);
}

// A video model's attention GFLOPs per clip as `sparsevit flops` reports them, for the dense
// spatial attention and the config's (the same temporal attention in both).
void add_video_attention_gflops(benchmarks::ModelBenchmarkResult& r) {
  if (!r.is_video()) return;
  auto fill = [&](benchmarks::ModelTiming& t, const config::AttentionSpec& spatial) {
    const analysis::VideoAttentionReport report =
        analysis::video_attention_report(spatial, r.temporal_spec, *r.video_layout);
    t.video_gflops =
        benchmarks::VideoAttentionGflops{report.spatial_gflops, report.temporal_gflops, report.attention_gflops};
    t.attention_gflops = report.attention_gflops;
  };
  fill(r.dense, config::AttentionSpec{});
  fill(r.sparse, r.spec);
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto o = std::make_shared<benchmarks::AttentionBenchmarkOptions>();
  auto m = std::make_shared<benchmarks::ModelBenchmarkOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time dense, dense-masked and sparse attention side by side (or, with --model, a whole model dense vs sparse)");
  cmd->add_option(option_names("attn-cfg"), o->attn_cfg, "attention config YAML (default: built-in Fibottention)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "override a mask kwarg: NAME=VALUE (repeatable)");
  cmd->add_option(option_names("tokens"), o->tokens, "tokens N, class token included")
      ->default_val(197)->check(CLI::Range(1, 1 << 20));
  cmd->add_option(option_names("heads"), o->heads, "heads H")->default_val(12)->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("head-dim"), o->head_dim, "head dimension D")->default_val(64)->check(CLI::Range(1, 1 << 16));
  cmd->add_option(option_names("batch"), o->batch, "batch size B")->default_val(8)->check(CLI::Range(1, 1 << 20));
  cmd->add_option(option_names("layers"), o->layers, "layers of the model the pattern comes from")
      ->default_val(12)->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("layer"), o->layer, "layer whose pattern is timed (0-based)")->default_val(0);
  cmd->add_flag(option_names("no-class-token"), o->no_class_token, "token 0 is a patch, not a class token");
  cmd->add_flag(option_names("backward"), o->backward, "time forward+backward (dq, dk, dv) instead of forward");
  cmd->add_option(option_names("threads"), o->threads, "CPU threads (0: every core)")
      ->default_val(0)->check(CLI::Range(0, 4096));
  cmd->add_option(option_names("repeats"), o->repeats, "timed repeats (the median is reported)")
      ->default_val(10)->check(CLI::Range(1, 100000));
  cmd->add_option(option_names("warmup"), o->warmup, "untimed warm-up runs")->default_val(3)->check(CLI::Range(0, 100000));
  cmd->add_option(option_names("max-dense-gib"), o->max_dense_gib,
                  "skip dense and masked when their N x N buffers would exceed this")
      ->default_val(8.0)->check(CLI::Range(0.0, 1e6));
  cmd->add_option(option_names("seed"), o->seed, "seed of the random q, k, v")->default_val(0);
  cmd->add_flag("--malloc-cache,--malloc_cache,!--no-malloc-cache,!--no_malloc_cache", o->malloc_cache,
                "keep freed memory in the process (glibc mallopt), as a caching allocator would (default on)");
  cmd->add_flag(option_names("json"), *json, "print one JSON object instead of the table");
  // Whole-model mode.
  cmd->add_option("--model", m->model,
                  "time this model (registry name) dense vs with --attn-cfg: inference forward, or with --backward a "
                  "training step (forward, loss, backward, AdamW); video models (timesformer_*): clips [B, C, T, H, W], "
                  "dense spatial attention vs the config's, the temporal attention the same in both");
  cmd->add_option(option_names("input_size"), m->input_size, "model image size override")->check(CLI::Range(1, 1 << 16));
  cmd->add_option(option_names("patch_size"), m->patch_size, "model patch size override")->check(CLI::Range(1, 1 << 12));
  cmd->add_option(option_names("embed_dim"), m->embed_dim, "model width override")->check(CLI::Range(1, 1 << 16));
  cmd->add_option(option_names("depth"), m->depth, "model depth override")->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("num_heads"), m->num_heads, "model heads override")->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("amp"), m->amp, "--model: none | bf16 (autocast the GEMMs to bfloat16)")
      ->default_val("none")->check(CLI::IsMember({"none", "bf16"}));
  cmd->add_flag(option_names("breakdown"), m->breakdown,
                "--model: also profile a few steps and print the share of a step per part (GEMMs, attention, norms, ...)");
  auto video = std::make_shared<VideoOptions>();
  bind_train_config_fields(cmd, {{"num_frames", &video->num_frames},
                                 {"attention_type", &video->attention_type},
                                 {"temporal_attn_cfg", &video->temporal_attn_cfg}});
  cmd->callback([o, m, video, json, cmd] {
    try {
      if (!m->model.empty()) {
        refuse_options(cmd, {"--tokens", "--heads", "--head-dim", "--layers", "--layer", "--no-class-token"},
                       "applies to the attention operator (bench without --model); a model's shape comes from its "
                       "name and --input_size, --patch_size, --embed_dim, --depth, --num_heads");
        // Only what was given: unset, the model's own (an image model refuses them).
        if (cmd->count("--num-frames") > 0) m->num_frames = video->num_frames;
        if (cmd->count("--attention-type") > 0) m->attention_type = video->attention_type;
        m->temporal_attn_cfg = video->temporal_attn_cfg;
        m->attn_cfg = o->attn_cfg;
        m->overrides = o->overrides;
        m->backward = o->backward;
        m->threads = o->threads;
        m->repeats = o->repeats;
        m->warmup = o->warmup;
        m->malloc_cache = o->malloc_cache;
        m->seed = o->seed;
        m->max_dense_gib = o->max_dense_gib;
        // --batch defaults to 8 for the operator; a model step defaults to finetune's 128.
        m->batch = cmd->count("--batch") > 0 ? o->batch : 128;
        benchmarks::ModelBenchmarkResult r = benchmarks::run_model_benchmark(*m);
        add_video_attention_gflops(r);
        std::cout << (*json ? r.to_json().dump() + "\n" : r.to_text()) << std::flush;
        return;
      }
      if (m->breakdown || m->amp != "none")
        throw UsageError("--breakdown and --amp apply to a whole model: add --model NAME");
      refuse_options(cmd,
                     {"--input_size", "--patch_size", "--embed_dim", "--depth", "--num_heads", "--num-frames",
                      "--attention-type", "--temporal-attn-cfg"},
                     "applies to a whole model: add --model NAME");
      const benchmarks::AttentionBenchmarkResult r = benchmarks::run_attention_benchmark(*o);
      if (*json) {
        std::cout << r.to_json().dump() << std::endl;
      } else {
        std::cout << r.to_text() << std::flush;
      }
    } catch (const c10::Error& e) {
      throw RuntimeError(std::string("bench failed: ") + e.what_without_backtrace());
    }
  });
}

}  // namespace sparsevit::cli
