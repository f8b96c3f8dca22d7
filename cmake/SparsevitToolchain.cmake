# Compiler launcher, warnings, sanitizers and the shared LibTorch precompiled header.

if(SPARSEVIT_USE_CCACHE)
  find_program(CCACHE_PROGRAM ccache)
  if(CCACHE_PROGRAM)
    # Precompiled headers need these sloppiness settings to get cache hits; the base dir makes
    # paths relative so that clones at other paths (worktrees, CI checkouts) share the cache.
    set(CMAKE_CXX_COMPILER_LAUNCHER
        ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} ${CCACHE_PROGRAM})
  endif()
endif()

add_library(sparsevit_warnings INTERFACE)
target_compile_options(sparsevit_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter -Winvalid-pch)

if(SPARSEVIT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SPARSEVIT_BUILD_FUZZERS needs clang (configure with CXX=clang++; scripts/fuzz does)")
  endif()
  # Coverage for libFuzzer and both sanitizers on every project source; vptr checks off (they
  # need RTTI of LibTorch's uninstrumented types).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
elseif(SPARSEVIT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# Every target that includes LibTorch reuses one precompiled header, built once
# by this object library (LibTorch headers cost ~20 s per translation unit).
# Unity builds of the LibTorch targets (SPARSEVIT_UNITY_BATCH sources a unit): each unit pays
# LibTorch's templates once instead of once per source. On by default: a cold build (a fresh
# machine, CI) is bounded by compile time (docs/building.md, "Build time"); turn it off
# (-DSPARSEVIT_UNITY_BUILD=OFF) for incremental work, where one edit recompiles its whole unit.
# Sources with their own compile options (the ISA kernels, the OpenMP units) stay alone.
option(SPARSEVIT_UNITY_BUILD "Unity builds of the LibTorch targets" ON)
set(SPARSEVIT_UNITY_BATCH 8 CACHE STRING "Sources per unity unit")

function(sparsevit_use_torch_pch target)
  if(SPARSEVIT_UNITY_BUILD)
    # Sources with their own compile options (the ISA kernels, the OpenMP units) stay alone.
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${SPARSEVIT_UNITY_BATCH})
  endif()
  if(NOT SPARSEVIT_USE_PCH)
    return()
  endif()
  if(NOT TARGET sparsevit_torch_pch)
    add_library(sparsevit_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/src/util/torch_pch.cpp)
    target_link_libraries(sparsevit_torch_pch PUBLIC ${TORCH_LIBRARIES})
    target_precompile_headers(sparsevit_torch_pch PRIVATE ${PROJECT_SOURCE_DIR}/src/util/torch_pch.h)
  endif()
  # The header is compiled -fPIC (for the shared op library); executables must match or GCC
  # ignores it, so they compile -fPIC too instead of CMake's -fPIE.
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  target_precompile_headers(${target} REUSE_FROM sparsevit_torch_pch)
endfunction()
