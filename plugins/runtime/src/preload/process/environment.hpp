#pragma once
// kairos in the environment of the program and of the processes it starts: out of the program's
// environ, LD_PRELOAD without libkairos.so for children that are not followed, and kairos's
// variables with the exec generation for the execs it follows.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kairos/runtime/settings.hpp>

namespace kairos::runtime {

// Resolves this library's own path (before any fork: it builds statics).
void prepare_environment_editing();

// LD_PRELOAD's value without libkairos.so; nullopt when kairos is not in it.
std::optional<std::string> preload_without_kairos(std::string_view preload);

// Takes kairos out of this process's environ (setenv: ordinary code only): its KAIROS_* variables
// (kept for the execs kairos follows) and its LD_PRELOAD entry. CUDA_INJECTION64_PATH stays where
// the gpu stage set it (a program that can reach CUDA): CUDA reads it at cuInit, after main began.
// The program's environment is then its own (docs/reliability.md).
void remove_kairos_from_environment();
// A setting's variable, from environ or, once removed from it, from what was kept.
std::optional<std::string> kairos_variable(setting which);

// fork: before the fork, the LD_PRELOAD entry a child that is not followed should have is built;
// in that child, environ's entry is swapped for it (one pointer store: async-signal-safe, no
// setenv, whose lock another thread may have held at the fork).
void prepare_child_environment();
void remove_kairos_from_environment_in_child() noexcept;

// The environment for an exec: `profiled` adds the exec generation (PID:N+1) and puts back what
// remove_kairos_from_environment took out, `strip` removes kairos from LD_PRELOAD. kairos's
// CUDA_INJECTION64_PATH is left out of either. Empty pointers: pass the caller's environment
// unchanged.
struct exec_environment {
  std::vector<std::string> storage;
  std::vector<char*> pointers;  // null-terminated
};
exec_environment environment_for_exec(char* const* environment, bool profiled, bool strip, std::string_view generation);

}  // namespace kairos::runtime
