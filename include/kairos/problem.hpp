#pragma once
// One shape for "this did not work", shared by the core, the plugins and the runtime. A step that
// can fail returns a `problem` (empty when it worked), or a `result<T>` (its value, or the problem)
// when it also has something to give back. A problem's text is one plain sentence: what failed,
// the input that made it fail, and what to do. It carries no "[kairos]" prefix: whoever decides
// what the failure means prints it (the runtime's report(), a tool's error line), and adds the
// prefix there, once.
//
// Exceptions from libraries (SQLite, libdw, PAPI, the filesystem) become problems at the one
// boundary that calls them (capture_problem), never in a silent catch.
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kairos {

class problem {
 public:
  problem() = default;
  explicit problem(std::string text) : text_{std::move(text)} {}
  // True when something failed.
  explicit operator bool() const noexcept { return !text_.empty(); }
  const std::string& text() const noexcept { return text_; }

 private:
  std::string text_;
};

// A value, or the problem that kept it from being made. Built from a problem, it must be a
// non-empty one. No operator bool: `has_value()` reads the same whichever way a caller hoped.
template <class T>
class result {
 public:
  result(T value) : state_{std::in_place_index<0>, std::move(value)} {}
  result(problem failure) : state_{std::in_place_index<1>, std::move(failure)} {}

  bool has_value() const noexcept { return state_.index() == 0; }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  // Empty when there is a value.
  problem failure() const { return has_value() ? problem{} : std::get<1>(state_); }

 private:
  std::variant<T, problem> state_;
};

// An exception's text without the "[kairos] " its thrower may have put in front (some plugins'
// errors still carry it for their own users): a line has one prefix.
inline std::string_view without_prefix(std::string_view text) noexcept {
  return text.starts_with("[kairos] ") ? text.substr(9) : text;
}

// Runs `work`; an exception it throws becomes the problem "<what>: <exception text>".
template <class Work>
problem capture_problem(std::string_view what, Work&& work) noexcept {
  try {
    std::forward<Work>(work)();
    return {};
  } catch (const std::exception& error) {
    return problem{std::string{what} + ": " + std::string{without_prefix(error.what())}};
  } catch (...) {
    return problem{std::string{what} + ": an unknown error"};
  }
}

}  // namespace kairos
