#pragma once
// ROCTx's markers (roctx.cpp): its functions wrapped through kairos::gotcha where libroctx64 is
// loaded; ranges become regions of kind roctx.
#include <optional>
#include <string>

namespace kairos::runtime {

// Wraps ROCTx's functions if its library is loaded now (nullopt: none loaded, or done before).
std::optional<std::string> wrap_roctx_if_loaded();
// The service thread's tick: a library loaded since (dlopen) is wrapped.
void roctx_tick();

}  // namespace kairos::runtime
