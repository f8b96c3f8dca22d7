// Training-step cost of the diffusion policy with and without Crossway's decoder (issue #32
// item 6), at scripts/policy-demo's sizes: vit_nano_patch8_48 (dense), spatial-softmax readout,
// obs_shift 4, down_dims 64,128,256, step_embed_dim 64, batch 64, obs_horizon 2, pred_horizon 16.
//
// Part 1 (the step): forward + backward + AdamW of DiffusionPolicy::compute_loss, one policy per
// variant on the same batch, the variants interleaved round by round so that the shared
// machine's load hits them alike; medians and ratios to the plain step.
// Part 2 (the decoder alone, per width): CrosswayDecoder forward and backward on [B, mid_dim, 4]
// mid features, then its stages as forward runs them, then every leaf layer (conv, GroupNorm,
// Mish, Upsample2d, linear) timed forward and backward alone on its input shape, to say which
// layer costs what.
//
//   build/policy_step_bench [--threads 2] [--rounds 5] [--batch 64] [--skip_crossway_step]
//                           [--decoder_dims 128,256 --decoder_dims 16,32 ...]
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/timing.h"
#include "policy/conv2d_components.h"
#include "policy/crossway_decoder.h"
#include "policy/diffusion_policy.h"
#include "runtime/host_info.h"
#include "runtime/malloc_cache.h"

namespace {

using sparsevit::policy::CrosswayDecoder;
using sparsevit::policy::CrosswayDecoderOptions;
using sparsevit::policy::CrosswayInput;
using sparsevit::policy::DiffusionPolicy;
using sparsevit::policy::DiffusionPolicyConfig;

using sparsevit::benchmarks::median;
using sparsevit::benchmarks::seconds_since;

struct Options {
  int threads = 2, rounds = 5;
  int64_t batch = 64;
  bool crossway_step = true;  // at the paper's width it takes ~10 s on 2 cores
  std::vector<std::vector<int64_t>> decoder_dims;
};

// scripts/policy-demo's recipe with `policy train`'s readout and shift defaults.
DiffusionPolicyConfig demo_config(double crossway_weight) {
  DiffusionPolicyConfig c;
  c.encoder_model = "vit_nano_patch8_48";
  c.obs_horizon = 2;
  c.pred_horizon = 16;
  c.action_horizon = 8;
  c.down_dims = {64, 128, 256};
  c.step_embed_dim = 64;
  c.readout.kind = sparsevit::policy::ObservationReadout::kSpatialSoftmax;
  c.obs_shift = 4;
  c.crossway_weight = crossway_weight;
  c.crossway_input = CrosswayInput::kUnetMid;
  return c;
}

struct Batch {
  at::Tensor images, agent_pos, actions;
};

Batch demo_batch(int64_t b) {
  at::manual_seed(1);
  return {at::rand({b, 2, 3, 48, 48}), at::rand({b, 2, 2}) * 512, at::rand({b, 16, 2}) * 512};
}

struct Variant {
  std::string name;
  std::shared_ptr<DiffusionPolicy> policy;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  at::Generator generator;
  std::vector<double> times;
};

std::string dims_text(const std::vector<int64_t>& v, const char* separator = "x") {
  std::string s;
  for (int64_t d : v) s += (s.empty() ? "" : separator) + std::to_string(d);
  return s;
}

Variant make_variant(double crossway_weight) {
  at::manual_seed(0);
  Variant v;
  v.policy = std::make_shared<DiffusionPolicy>(demo_config(crossway_weight));
  v.name = "plain";
  // The decoder the policy built (its width is the policy's choice, not this program's).
  for (const auto& child : v.policy->named_children())
    if (auto decoder = std::dynamic_pointer_cast<CrosswayDecoder>(child.value()))
      v.name = "crossway (decode_dims " + dims_text(decoder->options().decode_dims, ",") + ")";
  v.policy->train();
  v.optimizer = std::make_unique<torch::optim::AdamW>(
      v.policy->parameters(), torch::optim::AdamWOptions(1e-3).betas({0.95, 0.999}).weight_decay(1e-6));
  v.generator = at::make_generator<at::CPUGeneratorImpl>(0);
  return v;
}

double train_step(Variant& v, const Batch& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  v.optimizer->zero_grad();
  const sparsevit::policy::PolicyLoss loss =
      v.policy->compute_loss(batch.images, batch.agent_pos, batch.actions, v.generator);
  loss.total.backward();
  v.optimizer->step();
  return seconds_since(t0);
}

void bench_steps(const Options& o) {
  const Batch batch = demo_batch(o.batch);
  std::vector<Variant> variants;
  variants.push_back(make_variant(0.0));
  if (o.crossway_step) variants.push_back(make_variant(0.1));
  for (auto& v : variants) train_step(v, batch);  // warm-up: oneDNN primitives, allocator
  for (int r = 0; r < o.rounds; ++r)
    for (auto& v : variants) v.times.push_back(train_step(v, batch));
  const double plain = median(variants[0].times);
  std::printf("\n== training step (compute_loss forward + backward + AdamW), batch %lld, %d rounds interleaved\n",
              static_cast<long long>(o.batch), o.rounds);
  std::printf("%-34s %10s %10s %10s %8s\n", "variant", "median s", "min s", "max s", "x plain");
  for (const auto& v : variants)
    std::printf("%-34s %10.3f %10.3f %10.3f %8.2f\n", v.name.c_str(), median(v.times),
                *std::min_element(v.times.begin(), v.times.end()), *std::max_element(v.times.begin(), v.times.end()),
                median(v.times) / plain);
  std::fflush(stdout);
}

// The decoder DiffusionPolicy builds for the demo (mid_dim 256, 48 x 48 frames), at a width.
CrosswayDecoderOptions demo_decoder_options(const std::vector<int64_t>& dims) {
  CrosswayDecoderOptions d;
  d.input = CrosswayInput::kUnetMid;
  d.feature_dim = 256;
  d.n_obs_steps = 2;
  d.image_height = d.image_width = 48;
  d.n_groups = 8;
  d.decode_dims = dims;
  return d;
}

// Median forward and backward seconds of f on inputs of `shape` (input requires grad).
std::pair<double, double> time_layer(const std::function<at::Tensor(const at::Tensor&)>& f,
                                     const std::vector<int64_t>& shape, int reps) {
  std::vector<double> fwd, bwd;
  for (int i = 0; i <= reps; ++i) {
    const at::Tensor x = at::randn(shape).requires_grad_();
    auto t0 = std::chrono::steady_clock::now();
    const at::Tensor y = f(x);
    const double tf = seconds_since(t0);
    const at::Tensor g = at::randn_like(y);
    t0 = std::chrono::steady_clock::now();
    y.backward(g);
    const double tb = seconds_since(t0);
    if (i > 0) fwd.push_back(tf), bwd.push_back(tb);  // the first: warm-up
  }
  return {median(fwd), median(bwd)};
}

// Median forward and backward seconds of each stage of a chain (stage k's input: stage k - 1's
// output, detached; the last stage's output a scalar), backward stage by stage in reverse.
std::vector<std::pair<double, double>> time_chain(const std::vector<std::function<at::Tensor(const at::Tensor&)>>& stages,
                                                  const at::Tensor& input, int reps) {
  const std::size_t k = stages.size();
  std::vector<std::vector<double>> fwd(k), bwd(k);
  for (int r = 0; r <= reps; ++r) {
    std::vector<at::Tensor> in(k), out(k);
    at::Tensor x = input;
    for (std::size_t i = 0; i < k; ++i) {
      in[i] = x.detach().requires_grad_();
      const auto t0 = std::chrono::steady_clock::now();
      out[i] = stages[i](in[i]);
      if (r > 0) fwd[i].push_back(seconds_since(t0));
      x = out[i];
    }
    for (std::size_t i = k; i-- > 0;) {
      const at::Tensor grad = i + 1 == k ? at::ones_like(out[i]) : in[i + 1].grad();
      const auto t0 = std::chrono::steady_clock::now();
      out[i].backward(grad);
      if (r > 0) bwd[i].push_back(seconds_since(t0));
    }
  }
  std::vector<std::pair<double, double>> medians;
  for (std::size_t i = 0; i < k; ++i) medians.emplace_back(median(fwd[i]), median(bwd[i]));
  return medians;
}

void bench_decoder(const Options& o, const std::vector<int64_t>& dims) {
  const CrosswayDecoderOptions d = demo_decoder_options(dims);
  at::manual_seed(0);
  CrosswayDecoder decoder(d);
  const int64_t n = o.batch * d.n_obs_steps;
  const int reps = std::max(3, o.rounds);
  std::printf("\n== Crossway decoder alone, decode_dims %s, pe %lld, batch %lld (x%lld steps = %lld frames)\n",
              dims_text(dims, ",").c_str(), static_cast<long long>(d.decode_pe_dim), static_cast<long long>(o.batch),
              static_cast<long long>(d.n_obs_steps), static_cast<long long>(n));
  const at::Tensor target = at::rand({n, 3, 48, 48}) * 2 - 1;
  const at::Tensor mid = at::randn({o.batch, d.feature_dim, d.decode_resolution * d.decode_resolution});
  const auto [total_f, total_b] = time_layer(
      [&](const at::Tensor& m) { return decoder.loss(decoder.forward(m), target); }, mid.sizes().vec(), reps);
  std::printf("whole decoder + loss: forward %.4f s, backward %.4f s, total %.4f s\n", total_f, total_b,
              total_f + total_b);

  // The stages of CrosswayDecoder::forward as it runs them.
  std::vector<std::string> stage_names = {"grid_tile (proj)"};
  std::vector<std::function<at::Tensor(const at::Tensor&)>> stages = {
      [&](const at::Tensor& x) { return decoder.grid_tile(x); }};
  for (std::size_t i = 0; i < decoder.num_levels(); ++i) {
    stage_names.push_back("blocks." + std::to_string(i) + " (pe, 2 ResidualBlock2D, Upsample2d)");
    stages.push_back([&decoder, i](const at::Tensor& x) { return decoder.level_forward(i, x); });
  }
  stage_names.push_back("final_conv");
  stages.push_back([&](const at::Tensor& x) { return decoder.final_forward(x); });
  stage_names.push_back("loss");
  stages.push_back([&](const at::Tensor& x) { return decoder.loss(x, target); });
  const auto stage_times = time_chain(stages, mid, reps);
  std::printf("%-52s %9s %9s\n", "stage", "fwd s", "bwd s");
  for (std::size_t i = 0; i < stages.size(); ++i)
    std::printf("%-52s %9.4f %9.4f\n", stage_names[i].c_str(), stage_times[i].first, stage_times[i].second);

  // Each leaf layer alone on its input shape, in forward order; spatial size from the name:
  // blocks.j at h0 * 2^j, final_conv at H. Each as the decoder computes it: Upsample2d as a
  // whole, Conv2dBlock's Mish by mish_via_exp, the convs that take the positional grid by
  // conv2d_with_shared (GMAC: the conv's own count on the full map).
  const int64_t upsamplings = static_cast<int64_t>(dims.size()) - 1;
  const int64_t h0 = d.image_height >> upsamplings;
  int64_t channels = 0;
  double sum_f = 0, sum_b = 0;
  std::printf("%-40s %-16s %9s %9s %9s %7s\n", "layer", "input", "fwd s", "bwd s", "GMAC/fwd", "share");
  std::vector<std::tuple<std::string, std::string, double, double, double>> rows;
  std::string inside_upsample = "\x01";  // the name prefix of the Upsample2d being skipped
  for (const auto& item : decoder.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    const std::shared_ptr<torch::nn::Module>& m = item.value();
    if (name.rfind(inside_upsample, 0) == 0) continue;
    int64_t side = d.image_height;
    if (name.rfind("blocks.", 0) == 0) side = h0 << std::stoll(name.substr(7, name.find('.', 7) - 7));
    std::vector<int64_t> shape;
    std::string label = m->name().substr(m->name().rfind(':') + 1);
    double gmac = 0;
    std::function<at::Tensor(const at::Tensor&)> f;
    if (auto conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(m)) {
      const auto& co = conv->options;
      const int64_t k = (*co.kernel_size())[0];
      // A level's first conv and residual conv read [x, positional grid].
      const bool takes_pe = name.rfind("blocks.", 0) == 0 && (name.find(".0.blocks.0.block.0") != std::string::npos ||
                                                              name.find(".0.residual_conv") != std::string::npos);
      const int64_t cx = takes_pe ? co.in_channels() - d.decode_pe_dim : co.in_channels();
      shape = {n, cx, side, side};
      channels = co.out_channels();
      gmac = 1e-9 * n * cx * co.out_channels() * k * k * side * side;
      if (takes_pe) {
        // level 0 reads the r x r grid tile, the others full maps
        label += name.rfind("blocks.0.", 0) == 0 ? " + pe, tiled" : " + pe";
        if (name.rfind("blocks.0.", 0) == 0) shape = {n, cx, d.decode_resolution, d.decode_resolution};
        const at::Tensor pe = sparsevit::policy::crossway_positional_grid(1, d.decode_pe_dim, side, side, at::kFloat);
        f = [conv, pe](const at::Tensor& x) { return sparsevit::policy::conv2d_with_shared(*conv, x, pe); };
      } else {
        f = [conv](const at::Tensor& x) { return conv->forward(x); };
      }
    } else if (auto up = std::dynamic_pointer_cast<sparsevit::policy::Upsample2dImpl>(m)) {
      inside_upsample = name + ".";
      shape = {n, channels, side, side};
      gmac = 1e-9 * n * channels * channels * 16 * side * side;
      f = [up](const at::Tensor& x) { return up->forward(x); };
    } else if (auto norm = std::dynamic_pointer_cast<torch::nn::GroupNormImpl>(m)) {
      shape = {n, norm->options.num_channels(), side, side};
      f = [norm](const at::Tensor& x) { return norm->forward(x); };
    } else if (auto mish = std::dynamic_pointer_cast<torch::nn::MishImpl>(m)) {
      // proj's Mish (the module) acts per grid pixel, before the tiling; Conv2dBlock's on feature
      // maps, computed by mish_via_exp
      if (name.rfind("proj.", 0) == 0) {
        shape = {n * d.decode_resolution * d.decode_resolution, channels};
        f = [mish](const at::Tensor& x) { return mish->forward(x); };
      } else {
        shape = {n, channels, side, side};
        label = "mish_via_exp";
        f = [](const at::Tensor& x) { return sparsevit::policy::mish_via_exp(x); };
      }
    } else if (auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(m)) {
      const int64_t r = d.decode_resolution;
      shape = {n * r * r, linear->options.in_features()};
      channels = linear->options.out_features();
      gmac = 1e-9 * n * r * r * linear->options.in_features() * linear->options.out_features();
      f = [linear](const at::Tensor& x) { return linear->forward(x); };
    } else {
      continue;  // containers
    }
    const auto [tf, tb] = time_layer(f, shape, reps);
    sum_f += tf, sum_b += tb;
    rows.emplace_back(name + " (" + label + ")", dims_text(shape), tf, tb, gmac);
  }
  for (const auto& [name, shape, tf, tb, gmac] : rows)
    std::printf("%-40s %-16s %9.4f %9.4f %9.2f %6.1f%%\n", name.c_str(), shape.c_str(), tf, tb, gmac,
                100 * (tf + tb) / (sum_f + sum_b));
  std::printf("leaf layers sum: forward %.4f s, backward %.4f s (the rest: tiling, positional grid, adds, loss)\n",
              sum_f, sum_b);
  std::fflush(stdout);
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> v;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    v.push_back(std::stoll(text.substr(start, end - start)));
    start = end + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--rounds") o.rounds = std::stoi(next());
    else if (a == "--batch") o.batch = std::stoll(next());
    else if (a == "--skip_crossway_step") o.crossway_step = false;
    else if (a == "--decoder_dims") o.decoder_dims.push_back(parse_list(next()));
    else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--rounds R] [--batch B] [--skip_crossway_step] [--decoder_dims 128,256]...\n",
                   argv[0]);
      return 2;
    }
  }
  if (o.decoder_dims.empty()) o.decoder_dims = {{128, 256}};
  sparsevit::runtime::enable_malloc_cache();  // as `policy train` (train::ProcessContext) does
  at::set_num_threads(o.threads);
  at::set_num_interop_threads(1);
  const sparsevit::runtime::HostInfo host = sparsevit::runtime::describe_host();
  std::printf("policy_step_bench: %s, %d threads (at::get_num_threads %d), MKLDNN %s, %s\n", host.cpu.c_str(),
              o.threads, at::get_num_threads(), at::hasMKLDNN() ? "yes" : "no", sparsevit::runtime::utc_now().c_str());
  bench_steps(o);
  for (const auto& dims : o.decoder_dims) bench_decoder(o, dims);
  return 0;
}
