#pragma once
// The patcher's own wrappers of dlopen, dlsym and dlvsym: libraries loaded later get patched, and
// looking up a wrapped name returns its wrapper. Installed while any user binding is installed.
#include <kairos/plugins/gotcha/patcher.hpp>

namespace kairos::gotcha_patcher::detail {

binding& dlopen_hook();
binding& dlsym_hook();
binding& dlvsym_hook();

// The outermost wrapper when `resolved` is the original of an installed binding of `symbol`
// (and `version`, if given), else `resolved`. Defined with the registry.
void* wrapper_for(void* resolved, const char* symbol, const char* version);

}  // namespace kairos::gotcha_patcher::detail
