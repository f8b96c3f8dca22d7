#include "distributed/gradient_reducer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "util/errors.h"

namespace sparsevit::dist {

struct GradientReducer::Impl {
  struct Slot {
    int64_t bucket = 0, offset = 0, numel = 0;
  };
  struct Bucket {
    std::vector<int64_t> params;
    at::Tensor flat;
    int64_t pending = 0;
    int64_t handle = -1;
  };

  ProcessGroup& group;
  std::vector<at::Tensor> params;
  bool overlap;
  bool sync = true;             // false: accumulation step, hooks leave the gradients alone
  bool accumulated = false;     // an accumulation step ran since the last finish()
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::vector<char> got;        // parameter's gradient arrived this step (overlap)
  int64_t next_start = 0;       // buckets [0, next_start) are started this step
  int64_t started_during_backward = 0;
  std::vector<unsigned> hooks;
  std::mutex mutex;

  Impl(ProcessGroup& g, std::vector<at::Tensor> p, bool o) : group(g), params(std::move(p)), overlap(o) {}

  at::Tensor slice(int64_t i) {
    const Slot& s = slots[static_cast<std::size_t>(i)];
    return buckets[static_cast<std::size_t>(s.bucket)].flat.narrow(0, s.offset, s.numel).view(params[static_cast<std::size_t>(i)].sizes());
  }

  void pack(int64_t i, const at::Tensor& grad) {
    at::NoGradGuard no_grad;
    at::Tensor target = slice(i);
    if (grad.defined()) {
      target.copy_(grad);
    } else {
      target.zero_();
    }
  }

  void start_ready() {
    while (next_start < static_cast<int64_t>(buckets.size()) && buckets[static_cast<std::size_t>(next_start)].pending == 0) {
      Bucket& b = buckets[static_cast<std::size_t>(next_start++)];
      b.handle = group.allreduce_sum_async(b.flat);
    }
  }

  void on_grad(int64_t i, const at::Tensor& grad) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!sync) return;
    if (got[static_cast<std::size_t>(i)])
      group.fail("gradient averaging", "parameter " + std::to_string(i) +
                 " received two gradients in one backward pass (call finish() after every backward)");
    got[static_cast<std::size_t>(i)] = 1;
    // The hook sees this backward's gradient; earlier accumulation steps are already in .grad.
    const at::Tensor& earlier = params[static_cast<std::size_t>(i)].grad();
    pack(i, accumulated && earlier.defined() && grad.defined() ? grad + earlier : grad);
    --buckets[static_cast<std::size_t>(slots[static_cast<std::size_t>(i)].bucket)].pending;
    start_ready();
  }

  void reset() {
    std::fill(got.begin(), got.end(), 0);
    for (Bucket& b : buckets) {
      b.pending = static_cast<int64_t>(b.params.size());
      b.handle = -1;
    }
    next_start = 0;
    accumulated = false;
  }
};

GradientReducer::GradientReducer(ProcessGroup& group, std::vector<at::Tensor> params, int64_t bucket_bytes, bool overlap)
    : impl_(std::make_unique<Impl>(group, std::move(params), overlap)) {
  Impl& m = *impl_;
  if (bucket_bytes < 1) throw UsageError("the gradient bucket size must be > 0 bytes");
  m.slots.resize(m.params.size());
  m.got.assign(m.params.size(), 0);
  // Reverse registration order: backward produces the last layers' gradients first.
  int64_t bucket_used = 0;
  for (int64_t i = static_cast<int64_t>(m.params.size()) - 1; i >= 0; --i) {
    const at::Tensor& p = m.params[static_cast<std::size_t>(i)];
    if (!p.requires_grad()) throw UsageError("GradientReducer: parameter " + std::to_string(i) + " does not require grad");
    const int64_t bytes = static_cast<int64_t>(p.nbytes());
    bool fresh = m.buckets.empty();
    if (!fresh) {
      const at::Tensor& first = m.params[static_cast<std::size_t>(m.buckets.back().params.front())];
      fresh = first.scalar_type() != p.scalar_type() || first.device() != p.device() || bucket_used + bytes > bucket_bytes;
    }
    if (fresh) {
      m.buckets.emplace_back();
      bucket_used = 0;
    }
    m.buckets.back().params.push_back(i);
    bucket_used += bytes;
  }
  for (std::size_t b = 0; b < m.buckets.size(); ++b) {
    Impl::Bucket& bucket = m.buckets[b];
    int64_t offset = 0;
    for (int64_t i : bucket.params) {
      const int64_t n = m.params[static_cast<std::size_t>(i)].numel();
      m.slots[static_cast<std::size_t>(i)] = {static_cast<int64_t>(b), offset, n};
      offset += n;
    }
    const at::Tensor& first = m.params[static_cast<std::size_t>(bucket.params.front())];
    bucket.flat = at::zeros({offset}, first.options().requires_grad(false));
  }
  m.reset();
  if (m.overlap) {
    Impl* raw = impl_.get();
    for (std::size_t i = 0; i < m.params.size(); ++i) {
      const int64_t index = static_cast<int64_t>(i);
      m.hooks.push_back(m.params[i].register_hook([raw, index](const at::Tensor& grad) { raw->on_grad(index, grad); }));
    }
  }
}

GradientReducer::~GradientReducer() {
  for (std::size_t i = 0; i < impl_->hooks.size(); ++i) {
    try {
      impl_->params[i].remove_hook(impl_->hooks[i]);
    } catch (...) {
    }
  }
}

int64_t GradientReducer::num_buckets() const { return static_cast<int64_t>(impl_->buckets.size()); }

void GradientReducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->sync = sync;
  if (!sync) impl_->accumulated = true;
}

int64_t GradientReducer::buckets_started_during_backward() const { return impl_->started_during_backward; }

void GradientReducer::finish() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  struct ResetOnExit {
    Impl& m;
    ~ResetOnExit() { m.reset(); }
  } reset_on_exit{m};
  m.started_during_backward = m.overlap ? m.next_start : 0;
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    if (m.overlap && m.got[i]) continue;
    // Without overlap every gradient is packed here; with it, only those backward never produced.
    m.pack(static_cast<int64_t>(i), m.params[i].grad());
    --m.buckets[static_cast<std::size_t>(m.slots[i].bucket)].pending;
  }
  m.start_ready();
  const double world = static_cast<double>(m.group.world_size());
  at::NoGradGuard no_grad;
  for (Impl::Bucket& b : m.buckets) {
    m.group.wait(b.handle);
    b.flat.div_(world);
  }
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    at::Tensor averaged = m.slice(static_cast<int64_t>(i));
    at::Tensor& grad = m.params[i].mutable_grad();
    if (grad.defined()) {
      grad.copy_(averaged);
    } else {
      grad = averaged.clone();
    }
  }
}

}  // namespace sparsevit::dist
