# LibTorch taken from the installed torch package's own folder, without find_package(Torch).
#
# python/setup.py (and scripts/device-check) pass SPARSEVIT_TORCH_DIR, the installed torch
# package (<site-packages>/torch: PyPI's wheels, and Debian's python3-torch, whose lib/ links to
# /usr/lib/x86_64-linux-gnu), and SPARSEVIT_TORCH_VERSION. Why not TorchConfig.cmake:
# - its find_library() calls search the system prefixes before the wheel's lib/, so a machine
#   with Debian's libtorch-dev linked both libc10.so (the wheel's) and libc10.so.1.13 (issue 46);
# - for a CUDA wheel it includes Caffe2's cuda.cmake, which needs the CUDA toolkit even for a
#   CPU-only build, ignores CMAKE_CUDA_ARCHITECTURES and, with no GPU visible, adds -gencode for
#   every architecture from compute_50 (refused by nvcc 13).
# Here every library is a full path inside SPARSEVIT_TORCH_DIR/lib, the CUDA architectures are
# ours (CMAKE_CUDA_ARCHITECTURES, which setup.py derives from TORCH_CUDA_ARCH_LIST), and the C++
# standard is the one torch's own config asks of its users (C++20 from torch 2.10's wheels).
#
# Defines what the rest of the build reads from find_package(Torch): TORCH_LIBRARIES,
# TORCH_INCLUDE_DIRS, TORCH_INSTALL_PREFIX, Torch_VERSION, and the torch_cuda target for a CUDA
# wheel when the CUDA kernels are on.

set(TORCH_INSTALL_PREFIX "${SPARSEVIT_TORCH_DIR}")
set(Torch_VERSION "${SPARSEVIT_TORCH_VERSION}")
set(TORCH_INCLUDE_DIRS "${TORCH_INSTALL_PREFIX}/include" "${TORCH_INSTALL_PREFIX}/include/torch/csrc/api/include")
set(_sv_torch_lib "${TORCH_INSTALL_PREFIX}/lib")
foreach(_sv_lib torch torch_cpu c10)
  if(NOT EXISTS "${_sv_torch_lib}/lib${_sv_lib}.so")
    message(FATAL_ERROR "sparsevit: ${_sv_torch_lib}/lib${_sv_lib}.so is missing: SPARSEVIT_TORCH_DIR must be an "
                        "installed torch package's folder (<site-packages>/torch)")
  endif()
endforeach()

add_library(sparsevit_torch INTERFACE IMPORTED)
set_target_properties(sparsevit_torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
  INTERFACE_LINK_LIBRARIES "${_sv_torch_lib}/libtorch.so;${_sv_torch_lib}/libtorch_cpu.so;${_sv_torch_lib}/libc10.so"
  # The wheel's C++ ABI (torch._C._GLIBCXX_USE_CXX11_ABI), passed by setup.py.
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${SPARSEVIT_TORCH_CXX11_ABI}")
set(TORCH_LIBRARIES sparsevit_torch)

if(SPARSEVIT_CUDA_ENABLED AND EXISTS "${_sv_torch_lib}/libtorch_cuda.so")
  add_library(torch_cuda INTERFACE IMPORTED)
  set_target_properties(torch_cuda PROPERTIES
    INTERFACE_LINK_LIBRARIES "${_sv_torch_lib}/libtorch_cuda.so;${_sv_torch_lib}/libc10_cuda.so;CUDA::cudart"
    INTERFACE_COMPILE_DEFINITIONS "USE_CUDA")
  list(APPEND TORCH_LIBRARIES torch_cuda)
endif()
message(STATUS "sparsevit: LibTorch ${Torch_VERSION} from the torch folder ${TORCH_INSTALL_PREFIX} "
               "(C++${CMAKE_CXX_STANDARD}, _GLIBCXX_USE_CXX11_ABI=${SPARSEVIT_TORCH_CXX11_ABI})")
