#pragma once
// Producer: the annotations programs already carry for other tools (docs/openmp.md, "NVTX and
// Kokkos"). NVTX v3 (header-only) loads the library NVTX_INJECTION64_PATH names and calls its
// InitializeInjectionNvtx2, which fills NVTX's function table with kairos's (nvtx.cpp); Kokkos
// loads the one KOKKOS_TOOLS_LIBS (Kokkos 3: KOKKOS_PROFILE_LIBRARY) names and calls its kokkosp_
// hooks (kokkos.cpp); ROCTx's functions are wrapped where its library is loaded (roctx.cpp).
// kairos-run points both at libkairos.so where the program carries them. Ranges and kernels
// become regions of kind nvtx or kokkos; ranges that need not nest become annotation_range rows.
#include <cstdint>

namespace kairos::runtime {

struct annotation_sources {
  bool nvtx = false;
  bool kokkos = false;
  bool roctx = false;
};

// At init: which sources KAIROS_ANNOTATIONS accepts (a source's entry points answer only then).
void start_annotations(annotation_sources sources) noexcept;
// The end of the run: nothing more is recorded.
void stop_annotations() noexcept;
// For nvtx.cpp and kokkos.cpp: whether their source is recording now.
bool nvtx_recording() noexcept;
bool kokkos_recording() noexcept;
bool roctx_recording() noexcept;
// Whether each source reached kairos (for the metadata).
void set_nvtx_attached() noexcept;
void set_kokkos_attached() noexcept;
void set_roctx_attached() noexcept;
bool nvtx_attached() noexcept;
bool kokkos_attached() noexcept;
bool roctx_attached() noexcept;

}  // namespace kairos::runtime
