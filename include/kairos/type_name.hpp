#pragma once
// The readable name of a type, at compile time, without RTTI or demangling.
#include <string_view>

namespace kairos {

template <class T>
constexpr std::string_view type_name() noexcept {
  // __PRETTY_FUNCTION__ reads "... type_name() [with T = NAME; ...]" (g++) or "... [T = NAME]" (clang).
  std::string_view pretty = __PRETTY_FUNCTION__;
  constexpr std::string_view marker = "T = ";
  const auto begin = pretty.find(marker) + marker.size();
  const auto end = pretty.find_first_of(";]", begin);
  return pretty.substr(begin, end - begin);
}

// The name without its namespaces: "kairos::wall_clock" -> "wall_clock".
template <class T>
constexpr std::string_view short_type_name() noexcept {
  const std::string_view full = type_name<T>();
  const auto template_open = full.find('<');
  const auto scope = full.rfind("::", template_open);
  return scope == std::string_view::npos ? full : full.substr(scope + 2);
}

}  // namespace kairos
