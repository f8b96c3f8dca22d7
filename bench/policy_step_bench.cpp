// Training-step cost of the diffusion policy with and without Crossway's decoder (issue #32
// item 6), at scripts/policy-demo's sizes: vit_nano_patch8_48 (dense), spatial-softmax readout,
// obs_shift 4, down_dims 64,128,256, step_embed_dim 64, batch 64, obs_horizon 2, pred_horizon 16.
//
// Part 1 (the step): forward + backward + AdamW of DiffusionPolicy::compute_loss, one policy per
// variant on the same batch, the variants interleaved round by round so that the shared
// machine's load hits them alike; medians and ratios to the plain step.
// Part 2 (the decoder alone, per width): CrosswayDecoder forward and backward on [B, mid_dim, 4]
// mid features, then every leaf layer (conv, GroupNorm, Mish, transposed conv, linear) timed
// forward and backward on its own input shape, to say which layer costs what.
//
//   build/policy_step_bench [--threads 2] [--rounds 5] [--batch 64] [--skip_paper_step]
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
  int threads = 2, rounds = 5;
  int64_t batch = 64;
  bool paper_step = true;  // the paper-width step takes ~10 s on 2 cores
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

Variant make_variant(const std::string& name, double crossway_weight) {
  at::manual_seed(0);
  Variant v;
  v.name = name;
  v.policy = std::make_shared<DiffusionPolicy>(demo_config(crossway_weight));
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
  variants.push_back(make_variant("plain", 0.0));
  if (o.paper_step) variants.push_back(make_variant("crossway (decode_dims 128,256)", 0.1));
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

std::string dims_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t d : v) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

void bench_decoder(const Options& o, const std::vector<int64_t>& dims) {
  const CrosswayDecoderOptions d = demo_decoder_options(dims);
  at::manual_seed(0);
  CrosswayDecoder decoder(d);
  const int64_t n = o.batch * d.n_obs_steps;
  const int reps = std::max(3, o.rounds);
  std::printf("\n== Crossway decoder alone, decode_dims %s, pe %lld, batch %lld (x%lld steps = %lld frames)\n",
              dims_text(dims).c_str(), static_cast<long long>(d.decode_pe_dim), static_cast<long long>(o.batch),
              static_cast<long long>(d.n_obs_steps), static_cast<long long>(n));
  const at::Tensor target = at::rand({n, 3, 48, 48}) * 2 - 1;
  const auto [total_f, total_b] = time_layer(
      [&](const at::Tensor& mid) { return decoder.loss(decoder.forward(mid), target); }, {o.batch, 256, 4}, reps);
  std::printf("whole decoder + loss: forward %.3f s, backward %.3f s\n", total_f, total_b);

  // Leaf layers in forward order; spatial size from the name: blocks.j at h0 * 2^j, final_conv at H.
  const int64_t upsamplings = static_cast<int64_t>(dims.size()) - 1;
  const int64_t h0 = d.image_height >> upsamplings;
  int64_t channels = 0;
  double sum_f = 0, sum_b = 0;
  std::printf("%-32s %-20s %9s %9s %9s %7s\n", "layer", "input", "fwd s", "bwd s", "GMAC/fwd", "share");
  std::vector<std::tuple<std::string, std::string, double, double, double>> rows;
  for (const auto& item : decoder.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    const std::shared_ptr<torch::nn::Module>& m = item.value();
    int64_t side = d.image_height;
    if (name.rfind("blocks.", 0) == 0) side = h0 << std::stoll(name.substr(7, name.find('.', 7) - 7));
    std::vector<int64_t> shape;
    double gmac = 0;
    std::function<at::Tensor(const at::Tensor&)> f;
    if (auto conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(m)) {
      const auto& co = conv->options;
      shape = {n, co.in_channels(), side, side};
      channels = co.out_channels();
      gmac = 1e-9 * n * co.in_channels() * co.out_channels() * (*co.kernel_size())[0] * (*co.kernel_size())[1] *
             side * side;
      f = [conv](const at::Tensor& x) { return conv->forward(x); };
    } else if (auto up = std::dynamic_pointer_cast<torch::nn::ConvTranspose2dImpl>(m)) {
      const auto& co = up->options;
      shape = {n, co.in_channels(), side, side};
      channels = co.out_channels();
      gmac = 1e-9 * n * co.in_channels() * co.out_channels() * (*co.kernel_size())[0] * (*co.kernel_size())[1] *
             side * side;
      f = [up](const at::Tensor& x) { return up->forward(x); };
    } else if (auto norm = std::dynamic_pointer_cast<torch::nn::GroupNormImpl>(m)) {
      shape = {n, norm->options.num_channels(), side, side};
      f = [norm](const at::Tensor& x) { return norm->forward(x); };
    } else if (auto mish = std::dynamic_pointer_cast<torch::nn::MishImpl>(m)) {
      // proj's Mish acts per grid pixel (before the tiling); the others on feature maps
      if (name.rfind("proj.", 0) == 0) shape = {n * d.decode_resolution * d.decode_resolution, channels};
      else shape = {n, channels, side, side};
      f = [mish](const at::Tensor& x) { return mish->forward(x); };
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
    rows.emplace_back(name + " (" + m->name().substr(m->name().rfind(':') + 1) + ")", dims_text(shape), tf, tb, gmac);
  }
  for (const auto& [name, shape, tf, tb, gmac] : rows)
    std::printf("%-32s %-20s %9.4f %9.4f %9.2f %6.1f%%\n", name.c_str(), shape.c_str(), tf, tb, gmac,
                100 * (tf + tb) / (sum_f + sum_b));
  std::printf("leaf layers sum: forward %.3f s, backward %.3f s (the rest: cat, positional grid, adds, loss)\n", sum_f,
              sum_b);
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
    else if (a == "--skip_paper_step") o.paper_step = false;
    else if (a == "--decoder_dims") o.decoder_dims.push_back(parse_list(next()));
    else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--rounds R] [--batch B] [--skip_paper_step] [--decoder_dims 128,256]...\n",
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
