#pragma once
// A symbol as people read it: "solver::step(int)" for "_ZN6solver4stepEi". The one demangling
// helper of kairos (the symbolizer, the GPU plugin's kernel names). A symbol version
// ("memcpy@GLIBC_2.14", "f@@V2") is dropped first; a name that is not a mangled C++ name (C
// functions, "_start") comes back as given.
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace kairos {

inline std::string demangle(std::string_view symbol) {
  const std::string plain{symbol.substr(0, symbol.find('@'))};
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> readable{
      abi::__cxa_demangle(plain.c_str(), nullptr, nullptr, &status), &std::free};
  return status == 0 && readable ? std::string{readable.get()} : plain;
}
inline std::string demangle(const char* symbol) { return symbol ? demangle(std::string_view{symbol}) : std::string{}; }

}  // namespace kairos
