// TCPStore options that work on every LibTorch we build against.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace sparsevit::dist {

namespace detail {
template <typename Options>
auto disable_libuv(Options& options, int) -> decltype(options.useLibUV = false, void()) {
  options.useLibUV = false;
}
template <typename Options>
void disable_libuv(Options&, long) {}
}  // namespace detail

// LibTorch >= 2.2 asks for the libuv TCPStore by default, and Debian 13's LibTorch 2.6 is built
// without libuv ("use_libuv was requested but PyTorch was build without libuv support"): the
// classic store where the option exists (LibTorch 1.13 has no such option).
inline c10d::TCPStoreOptions classic_tcp_store_options() {
  c10d::TCPStoreOptions options;
  detail::disable_libuv(options, 0);
  return options;
}

}  // namespace sparsevit::dist
