#pragma once
// kairos::call_through(function, args...): how kairos's code calls the program's (a wrapper's
// original, a thread's start routine, an OpenMP region's body), so that a profiler can tell, by
// address alone, kairos's frames that only pass a call on from those doing kairos's own work.
//
// The call goes through kairos_call_through, a few instructions of assembly (call_through.cpp)
// that call `invoke(call)`, and `invoke`, which calls `function`. So a stack, leaf first, reads
// function ← invoke ← kairos_call_through ← the kairos frame that made the call: a kairos frame
// whose callee is not kairos's is passing a call on exactly when it is the one frame directly
// above kairos_call_through; any other is kairos's own work. Assembly, because the range must be
// exact: GCC ignores a section attribute on template instances, and a compiled helper may be
// cloned or inlined elsewhere. Costs two indirect calls (a few nanoseconds) a call.
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(KAIROS_GOTCHA_AVAILABLE) && !KAIROS_GOTCHA_AVAILABLE
#define KAIROS_GOTCHA_CALL_THROUGH 0
#else
#define KAIROS_GOTCHA_CALL_THROUGH 1
extern "C" void kairos_call_through(void (*invoke)(void*), void* call);
#endif

namespace kairos {

namespace call_through_detail {

template <class Function, class... Args>
struct pending {
  using result = std::invoke_result_t<Function&, Args...>;
  static_assert(std::is_void_v<result> || std::is_default_constructible_v<result>,
                "call_through passes on calls of C functions: their results are default-constructible");
  Function& function;
  std::tuple<Args&&...> arguments;
  std::conditional_t<std::is_void_v<result>, char, result> value{};

  // Flattened so that, at any optimization level, exactly one frame lies between
  // kairos_call_through and `function`; the empty statement after the call keeps that frame on the
  // stack (no tail call).
  [[gnu::flatten]] static void invoke(void* opaque) {
    auto& call = *static_cast<pending*>(opaque);
    if constexpr (std::is_void_v<result>)
      std::apply(call.function, std::move(call.arguments));
    else
      call.value = std::apply(call.function, std::move(call.arguments));
    asm volatile("" ::: "memory");
  }
};

}  // namespace call_through_detail

template <class Function, class... Args>
decltype(auto) call_through(Function&& function, Args&&... arguments) {
#if KAIROS_GOTCHA_CALL_THROUGH
  using call = call_through_detail::pending<std::remove_reference_t<Function>, Args...>;
  call pending{function, std::forward_as_tuple(std::forward<Args>(arguments)...)};
  kairos_call_through(&call::invoke, &pending);
  if constexpr (!std::is_void_v<typename call::result>) return pending.value;
#else
  return std::invoke(std::forward<Function>(function), std::forward<Args>(arguments)...);
#endif
}

namespace gotcha_patcher {

// Where kairos_call_through's instructions lie ([begin, end); both 0 where there is none): a frame
// whose return address falls in it is kairos_call_through's own. Taken inside the library, from
// hidden labels: a program's &kairos_call_through may be its own PLT entry.
struct call_through_code {
  const void* begin = nullptr;
  const void* end = nullptr;
};
#if KAIROS_GOTCHA_CALL_THROUGH
call_through_code call_through_range() noexcept;
#else
inline call_through_code call_through_range() noexcept { return {}; }
#endif

}  // namespace gotcha_patcher

}  // namespace kairos
