# SPARSEVIT_WITH_CUDA: AUTO (default: on when nvcc is found), ON (nvcc required) or OFF.
# Sets SPARSEVIT_CUDA_ENABLED, enables the CUDA language (CMAKE_CUDA_ARCHITECTURES defaults to
# 80;90a: A100 and H100/H200), and SPARSEVIT_NVCC_LAUNCHER, the wrapper that fails a compile whose
# ptxas report shows register spills. After find_package(Torch), sparsevit_detect_torch_cuda()
# sets SPARSEVIT_TORCH_HAS_CUDA: whether the LibTorch found can take the CUDA glue.

set(_sv_cuda_request "${SPARSEVIT_WITH_CUDA}")
string(TOUPPER "${_sv_cuda_request}" _sv_cuda_request)
set(SPARSEVIT_CUDA_ENABLED OFF)
if(_sv_cuda_request STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SPARSEVIT_CUDA_ENABLED ON)
  endif()
elseif(_sv_cuda_request)
  set(SPARSEVIT_CUDA_ENABLED ON)
endif()

if(SPARSEVIT_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90a")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # The launcher needs any python3 (not FindPython3 here: src/python asks it for more components).
  if(Python3_EXECUTABLE)
    set(_sv_launcher_python "${Python3_EXECUTABLE}")
  else()
    find_program(SPARSEVIT_LAUNCHER_PYTHON NAMES python3 REQUIRED)
    set(_sv_launcher_python "${SPARSEVIT_LAUNCHER_PYTHON}")
  endif()
  set(SPARSEVIT_NVCC_LAUNCHER "${_sv_launcher_python};${CMAKE_CURRENT_LIST_DIR}/nvcc_spill_check.py")
  message(STATUS "sparsevit: CUDA kernels ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "sparsevit: CUDA kernels OFF (SPARSEVIT_WITH_CUDA=${SPARSEVIT_WITH_CUDA})")
endif()

# A CUDA build of LibTorch defines the torch_cuda target (or lists TORCH_CUDA_LIBRARIES /
# sets CAFFE2_USE_CUDA); Debian's LibTorch is CPU-only.
macro(sparsevit_detect_torch_cuda)
  set(SPARSEVIT_TORCH_HAS_CUDA OFF)
  if(SPARSEVIT_CUDA_ENABLED AND (TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CAFFE2_USE_CUDA))
    set(SPARSEVIT_TORCH_HAS_CUDA ON)
  endif()
  message(STATUS "sparsevit: CUDA glue for the operators ${SPARSEVIT_TORCH_HAS_CUDA} "
                 "(LibTorch ${Torch_VERSION} is a CUDA build: ${SPARSEVIT_TORCH_HAS_CUDA})")
endmacro()
