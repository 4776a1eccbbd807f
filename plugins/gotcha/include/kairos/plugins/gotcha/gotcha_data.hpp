#pragma once
// What a wrapper knows about the call it intercepts: handed to "replace" components, which
// receive it with the original function pointer (the seed's function-wrapper form).
#include <cstddef>
#include <string_view>

namespace kairos {

struct gotcha_data {
  std::string_view symbol;       // the wrapped name, without a version: "pthread_cond_wait"
  std::string_view version;      // the requested version ("GLIBC_2.3.2"), empty for the default one
  std::size_t index = 0;         // the slot of the gotcha<N, ...> that wraps it
  const void* caller = nullptr;  // this call's return address, in the code that made it (replace form)
};

}  // namespace kairos
