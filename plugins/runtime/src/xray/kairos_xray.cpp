// Compiled into a program built with XRay (kairos_instrument(<target> XRAY) adds it): at start-up it
// hands libkairos.so, when kairos-run preloaded it, XRay's functions (see xray_api.h). Without
// kairos it does nothing, and the sleds stay unpatched: a few nops each.
#include <dlfcn.h>

#include <xray/xray_interface.h>

#include "xray_api.h"

namespace {

// XRay's enums are ints in the contract: thin casts, never instrumented themselves.
[[clang::xray_never_instrument]] int set_handler(void (*handler)(int32_t, int)) {
  return __xray_set_handler(reinterpret_cast<void (*)(int32_t, XRayEntryType)>(handler));
}
[[clang::xray_never_instrument]] int patch() { return __xray_patch(); }
[[clang::xray_never_instrument]] int unpatch() { return __xray_unpatch(); }
[[clang::xray_never_instrument]] int patch_function(int32_t id) { return __xray_patch_function(id); }
[[clang::xray_never_instrument]] int unpatch_function(int32_t id) { return __xray_unpatch_function(id); }

[[clang::xray_never_instrument]] __attribute__((constructor)) void attach_to_kairos() {
  auto attach = reinterpret_cast<kairos_xray_attach_function>(dlsym(RTLD_DEFAULT, "kairos_xray_attach"));
  if (attach == nullptr) return;
  static const kairos_xray_api api{KAIROS_XRAY_API_VERSION,
                                   &set_handler,
                                   &__xray_remove_handler,
                                   &patch,
                                   &unpatch,
                                   &patch_function,
                                   &unpatch_function,
                                   &__xray_function_address,
                                   &__xray_max_function_id};
  attach(&api);
}

}  // namespace
