# The CUDA backend's tests against a real device, included by tests/CMakeLists.txt where the CUDA
# toolkit (find_package(CUDAToolkit)) with CUPTI was found and kairos_gpu exists:
#   cuda_program             a small CUDA program (nvcc): kernels on two streams, copies, a memset
#   kairos_gpu_cupti_check   cuda_program's workload in-process under the collector, CUPTI's view of
#                            it compared with the program's own cudaEvent timings
# ctest "gpu: cupti check" is skipped (exit status 77, and kairos's skip marker) where there is no
# CUDA device. Both need a CUDA compiler: CMake's CUDA language is enabled only where nvcc is found.
if(NOT CUDAToolkit_FOUND OR NOT TARGET kairos_gpu)
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")  # the toolkit's own, off PATH
else()
  include(CheckLanguage)
  check_language(CUDA)
endif()
if(NOT CMAKE_CUDA_COMPILER)
  kairos_tests_not_built("gpu (CUDA device)" "no CUDA compiler (nvcc) found at configure time" "")
  return()
endif()
enable_language(CUDA)

# sm_90 (H100) code, and PTX for compute_75 (the oldest CUDA 13 supports) that the driver compiles
# for any other GPU.
set(kairos_cuda_test_architectures 90-real 75-virtual)

add_executable(kairos_cuda_program cuda_program.cu)
set_target_properties(kairos_cuda_program PROPERTIES OUTPUT_NAME cuda_program
  CUDA_ARCHITECTURES "${kairos_cuda_test_architectures}" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

# The same workload without its main(), for cupti_check.
add_library(kairos_cuda_workload OBJECT cuda_program.cu)
target_compile_definitions(kairos_cuda_workload PRIVATE CUDA_PROGRAM_NO_MAIN)
set_target_properties(kairos_cuda_workload PROPERTIES
  CUDA_ARCHITECTURES "${kairos_cuda_test_architectures}" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

add_executable(kairos_gpu_cupti_check cupti_check.cpp $<TARGET_OBJECTS:kairos_cuda_workload>)
# The shared runtime (libcudart.so): the backend finds it loaded; cuda_program links it statically
# (nvcc's default), where only libcuda.so.1 shows that CUDA is there.
target_link_libraries(kairos_gpu_cupti_check PRIVATE kairos_gpu CUDA::cudart)

add_test(NAME "gpu: cupti check" COMMAND kairos_gpu_cupti_check)
set_tests_properties("gpu: cupti check" PROPERTIES SKIP_RETURN_CODE 77
  SKIP_REGULAR_EXPRESSION "${KAIROS_TEST_SKIP_MARKER}" TIMEOUT 60)
