# Decides whether the CUDA backend is built (FATHOM_WITH_CUDA) and configures a target for it.
#
# Binaries link the CUDA runtime statically and never the driver stub, so every Fathom
# executable starts on a machine without a GPU or driver; "no GPU" is then reported at run
# time as cudaErrorNoDevice / cudaErrorInsufficientDriver.

set(FATHOM_WITH_CUDA OFF)
if(FATHOM_CUDA_EMULATION)
  # The CUDA emulation build (docs/gpu.md, "CUDA emulation"): the CUDA backend's sources, .cu
  # files included, compiled by the host compiler against the SIMT emulator (core/simt), which
  # also stands in for cudart and cuBLASLt. Only the toolkit's headers are used.
  find_package(CUDAToolkit REQUIRED)
  set(FATHOM_WITH_CUDA ON)
  message(STATUS "Fathom: CUDA backend emulated on the CPU (FATHOM_CUDA_EMULATION=ON, headers of CUDA ${CUDAToolkit_VERSION})")
elseif(FATHOM_CUDA STREQUAL "OFF")
  message(STATUS "Fathom: CUDA backend disabled (FATHOM_CUDA=OFF)")
else()
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(FATHOM_CUDA_PTX)
      list(APPEND CMAKE_CUDA_ARCHITECTURES 90-virtual)
      list(REMOVE_DUPLICATES CMAKE_CUDA_ARCHITECTURES)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(FATHOM_WITH_CUDA ON)
    message(STATUS "Fathom: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(FATHOM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FATHOM_CUDA=ON but no CUDA compiler was found; install the CUDA toolkit "
                        "or set CMAKE_CUDA_COMPILER=/path/to/nvcc (or build with -DFATHOM_CUDA=OFF)")
  else()
    message(STATUS "Fathom: no nvcc found, CUDA backend off (FATHOM_CUDA=AUTO)")
  endif()
endif()

function(fathom_configure_cuda target)
  if(NOT FATHOM_WITH_CUDA)
    return()
  endif()
  if(FATHOM_CUDA_EMULATION)
    target_compile_definitions(${target} PUBLIC FATHOM_CUDA_EMULATION=1)
    target_include_directories(${target} PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
    return()
  endif()
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Static CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
  # cuBLASLt (the matmul/linear GEMMs) is linked as a shared library: it is large, and every GPU
  # machine has it beside the driver. It loads without a driver, like the static runtime.
  target_link_libraries(${target} PRIVATE CUDA::cudart_static CUDA::cublasLt)
  # The runtime headers are needed by the host-side .cpp files of the CUDA backend.
  target_include_directories(${target} PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
endfunction()

# Kernel sources the SIMT emulator runs with its shared-memory race checker: GCC's ThreadSanitizer
# instrumentation without its runtime, whose hooks the emulator implements (core/simt/
# sanitizer_hooks.cpp). A translation unit cannot also have ASan's instrumentation; the hooks pass
# every other access on to ASan's checks.
set(FATHOM_SIMT_RACE_CHECK_OPTIONS -fno-sanitize=address -fsanitize=thread --param=tsan-instrument-func-entry-exit=0)

# In the emulation build the target's .cu files are C++ (after every source has been added).
function(fathom_compile_cuda_sources_as_cxx target)
  if(NOT FATHOM_CUDA_EMULATION)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.cu$")
  # -O2 whatever the build type: emulated threads run the kernels' code a block at a time, slowly.
  # (`#pragma unroll` is nvcc's; the host compiler ignores it, quietly.)
  set_source_files_properties(${sources} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX
    COMPILE_OPTIONS "-O2;-Wno-unknown-pragmas;${FATHOM_SIMT_RACE_CHECK_OPTIONS}")
endfunction()
