#pragma once
// The operations a bundle forwards to its members, and the one best-match rule that calls them:
// `c.f(args...)` if well-formed, else `c.f()` if well-formed, else nothing, decided at compile time.
#include <string_view>
#include <utility>

namespace kairos {

// Arguments reach every member in turn, so each member sees them as lvalues (never moved-from).
#define KAIROS_OPERATION(member, reads_value)                                                                     \
  struct member {                                                                                                 \
    static constexpr std::string_view name = #member;                                                             \
    static constexpr bool reads_measurement = reads_value;                                                        \
    template <class Component, class... Args>                                                                     \
    constexpr auto operator()(Component& component, Args&... args) const -> decltype(component.member(args...)) { \
      return component.member(args...);                                                                           \
    }                                                                                                             \
  }

// `reads_measurement`: the operation takes a reading, so members that share a cache (getrusage)
// receive the bundle's one fresh reading instead of the caller's arguments.
namespace op {
KAIROS_OPERATION(record, true);
KAIROS_OPERATION(start, true);
KAIROS_OPERATION(stop, true);
KAIROS_OPERATION(sample, true);
KAIROS_OPERATION(audit, false);
KAIROS_OPERATION(mark, false);
KAIROS_OPERATION(store, false);
KAIROS_OPERATION(get, false);
}  // namespace op
#undef KAIROS_OPERATION

enum class reach { with_arguments, without_arguments, none };

// How `Operation` reaches a `Component` given `Args`.
template <class Operation, class Component, class... Args>
constexpr reach reach_of() noexcept {
  if constexpr (requires(Component & c, Args & ... a) { Operation{}(c, a...); })
    return reach::with_arguments;
  else if constexpr (requires(Component & c) { Operation{}(c); })
    return reach::without_arguments;
  else
    return reach::none;
}

template <class Operation, class Component, class... Args>
concept reaches = reach_of<Operation, Component, Args...>()
!= reach::none;

// The best-match call. Returns what the member returns (void when nothing is reached).
template <class Operation, class Component, class... Args>
constexpr decltype(auto) invoke_best(Component& component, Args&... args) {
  constexpr reach how = reach_of<Operation, Component, Args...>();
  if constexpr (how == reach::with_arguments)
    return Operation{}(component, args...);
  else if constexpr (how == reach::without_arguments)
    return Operation{}(component);
}

template <class Operation, class Component, class... Args>
using invoke_result_t = decltype(invoke_best<Operation>(std::declval<Component&>(), std::declval<Args&>()...));

}  // namespace kairos
