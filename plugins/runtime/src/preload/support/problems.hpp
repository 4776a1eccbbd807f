#pragma once
// One way to report a problem, for the whole runtime. A step that can fail returns a `problem`
// (empty when it worked): one sentence saying what failed, naming the input, and what to do.
// Whoever decides what the failure means for the run (lifecycle, mostly) reports it: one
// "[kairos]" line on stderr. Exceptions from libraries (SQLite, libdw, the filesystem) become
// problems at the one boundary that calls them (capture_problem), never a silent catch.
//
// Lines are written with one write(2) each, so lines from several threads or processes never
// interleave, and never through the program's stdio buffers.
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace kairos::runtime {

class problem {
 public:
  problem() = default;
  explicit problem(std::string text) : text_{std::move(text)} {}
  explicit operator bool() const noexcept { return !text_.empty(); }
  const std::string& text() const noexcept { return text_; }

 private:
  std::string text_;
};

// Prints one line on stderr, "[kairos] " added unless present.
void report(std::string_view line) noexcept;
inline void report(const problem& failure) noexcept {
  if (failure) report(failure.text());
}

// An exception's text without the "[kairos] " its thrower may have put in front (the plugins'
// errors carry it for their own users): a line has one prefix.
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

// kairos keeps a private, close-on-exec copy of stderr (above the program's descriptors):
// programs such as coreutils close fd 2 in their own atexit handlers, before kairos's summary.
// release_stderr() drops it (a child that is not followed); async-signal-safe.
void keep_stderr() noexcept;
void release_stderr() noexcept;

// KAIROS_VERBOSE, set once the settings are loaded (0 before).
int verbosity() noexcept;
void set_verbosity(int level) noexcept;

}  // namespace kairos::runtime
