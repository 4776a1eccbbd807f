// A program that looks to kairos as one nvcc built does (a .nv_fatbin section, where device code
// goes) but has no CUDA: it prints CUDA_INJECTION64_PATH as main finds it (reliability_tests.py).
#include <cstdio>
#include <cstdlib>

__attribute__((used, section(".nv_fatbin"))) const char device_code[16] = "no device code";

int main() {
  const char* injection = std::getenv("CUDA_INJECTION64_PATH");
  std::printf("%s\n", injection ? injection : "(unset)");
  return 0;
}
