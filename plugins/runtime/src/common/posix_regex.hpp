#pragma once
// POSIX extended regular expressions (glibc's regcomp), the one kind kairos accepts in settings:
// libstdc++'s std::regex overflowed a heap buffer on inputs the settings fuzzer made, and recurses
// once per character of a pattern.
#include <regex.h>

#include <kairos/problem.hpp>

#include <cstddef>
#include <string>

namespace kairos::runtime {

class posix_regex {
 public:
  // Throws nothing: failure() says why it did not compile (empty when it did).
  explicit posix_regex(const std::string& pattern) {
    if (!bounded_repetition(pattern)) {
      failure_ = problem{"its repetitions ('+', {m,n}) multiply past 1000, or a quantifier follows another"};
      return;
    }
    const int status = regcomp(&compiled_, pattern.c_str(), REG_EXTENDED | REG_NOSUB);
    if (status == 0) return;
    char text[256];
    regerror(status, &compiled_, text, sizeof text);
    failure_ = problem{text};
  }
  posix_regex(const posix_regex&) = delete;
  posix_regex& operator=(const posix_regex&) = delete;
  ~posix_regex() {
    if (!failure_) regfree(&compiled_);
  }

  const problem& failure() const noexcept { return failure_; }
  // Whether the expression matches somewhere in `text` (a C string: names never hold a NUL).
  bool search(const std::string& text) const noexcept {
    return !failure_ && regexec(&compiled_, text.c_str(), 0, nullptr, 0) == 0;
  }

 private:
  // glibc's regcomp copies what a '+' or a {m,n} applies to (m or n times): stacked or nested,
  // the copies multiply, and compiling takes minutes (the settings fuzzer found "1+++..." and
  // "{1000}{1000}"). So the product of those copies is bounded, and a quantifier may not follow
  // another (which POSIX leaves undefined anyway).
  static bool bounded_repetition(const std::string& pattern) {
    double product = 1;
    bool after_quantifier = false;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      const char c = pattern[i];
      if (c == '\\') {
        ++i;
        after_quantifier = false;
        continue;
      }
      const bool quantifier = c == '+' || c == '*' || c == '?' || c == '{';
      if (quantifier && after_quantifier) return false;
      after_quantifier = quantifier;
      if (c == '+') product *= 2;
      if (c != '{') continue;
      double bound = 0, largest = 2;  // "{m,}" copies at least twice
      for (++i; i < pattern.size() && pattern[i] != '}'; ++i) {
        if (pattern[i] >= '0' && pattern[i] <= '9')
          bound = bound * 10 + (pattern[i] - '0');
        else
          bound = 0;
        if (bound > largest) largest = bound;
      }
      product *= largest;
      if (product > 1000) return false;
    }
    return product <= 1000;
  }

  regex_t compiled_{};
  problem failure_;
};

}  // namespace kairos::runtime
