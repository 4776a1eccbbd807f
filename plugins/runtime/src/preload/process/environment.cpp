#include "preload/process/environment.hpp"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <kairos/runtime/settings.hpp>

extern char** environ;

namespace kairos::runtime {
namespace {

struct library_paths {
  std::string own;
  std::string canonical;
};
library_paths* paths = nullptr;  // built once at init, never destroyed

// "LD_PRELOAD=<kept>" for a child that is not followed (null: kairos is not in LD_PRELOAD). Only
// the entry's pointer is swapped, never the array's length: programs such as bash keep their own
// count of environ's entries, and a shorter array made bash crash in the child. When nothing
// else is kept the value is empty, which the loader treats as no preload. Rebuilt before a fork
// when LD_PRELOAD changed; the previous one is kept alive (a child may still point at it).
const char* child_preload_entry = nullptr;

// kairos's own variables (those the settings table names), out of environ since init (remove_kairos_from_environment),
// for the environment of an exec kairos follows (null: they are still in environ).
std::vector<std::string>* kept_variables = nullptr;

// Set by the gpu stage (gpu/gpu_activity.cpp) so that CUDA calls kairos at cuInit; an exec gets it
// no more than LD_PRELOAD (kairos in the new image sets it again where CUDA can be reached). A
// fork child needs nothing: kairos is already in its memory.
constexpr std::string_view cuda_injection_prefix = "CUDA_INJECTION64_PATH=";
// Set by kairos-run where the program carries NVTX or Kokkos (docs/openmp.md; Kokkos 3 reads the
// second name), and read by them after init, so they stay in environ; a child that is not followed
// does not get them (one that is does: no kairos-run is there to set them again).
constexpr std::array<std::string_view, 3> annotation_tool_prefixes{
    "NVTX_INJECTION64_PATH=", "KOKKOS_TOOLS_LIBS=", "KOKKOS_PROFILE_LIBRARY="};

// A variable of the settings table: another KAIROS_ variable (a test harness's, a typo) is the
// program's, and stays.
bool is_setting_variable(std::string_view name) {
  const auto* definition = name.starts_with("KAIROS_") ? find_setting(name) : nullptr;
  return definition && definition->variable == name;
}

bool is_this_library(std::string_view entry) {
  if (entry == paths->own) return true;
  std::error_code error;
  const auto canonical = std::filesystem::weakly_canonical(std::string{entry}, error);
  return !error && canonical == paths->canonical;
}

bool names_this_library_for_annotations(std::string_view assignment) {
  for (const auto prefix : annotation_tool_prefixes)
    if (assignment.starts_with(prefix)) return is_this_library(assignment.substr(prefix.size()));
  return false;
}

}  // namespace

void prepare_environment_editing() {
  if (paths) return;
  paths = new library_paths;
  Dl_info info{};
  paths->own = dladdr(reinterpret_cast<void*>(&prepare_environment_editing), &info) && info.dli_fname ? info.dli_fname
                                                                                                      : "libkairos.so";
  std::error_code error;
  paths->canonical = std::filesystem::weakly_canonical(paths->own, error).string();
}

std::optional<std::string> preload_without_kairos(std::string_view preload) {
  prepare_environment_editing();
  std::string kept;
  bool removed = false;
  std::size_t position = 0;
  while (position <= preload.size()) {
    auto end = preload.find_first_of(": ", position);
    if (end == std::string_view::npos) end = preload.size();
    const auto entry = preload.substr(position, end - position);
    if (!entry.empty()) {
      if (is_this_library(entry))
        removed = true;
      else
        kept += (kept.empty() ? "" : ":") + std::string{entry};
    }
    position = end + 1;
  }
  if (!removed) return std::nullopt;
  return kept;
}

void remove_kairos_from_environment() {
  prepare_environment_editing();
  if (!kept_variables) kept_variables = new std::vector<std::string>;
  std::vector<std::string> names;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view assignment{*entry};
    const auto name = assignment.substr(0, assignment.find('='));
    if (!is_setting_variable(name) || name.size() == assignment.size()) continue;
    kept_variables->emplace_back(assignment);
    names.emplace_back(name);
  }
  for (const auto& name : names) unsetenv(name.c_str());
  const char* preload = std::getenv("LD_PRELOAD");
  if (!preload) return;
  if (auto kept = preload_without_kairos(preload)) {
    if (kept->empty())
      unsetenv("LD_PRELOAD");
    else
      setenv("LD_PRELOAD", kept->c_str(), 1);
  }
}

void prepare_child_environment() {
  static std::string* last_preload = new std::string{"\n"};  // never a real value
  const char* preload = std::getenv("LD_PRELOAD");
  if (*last_preload == (preload ? preload : "")) return;  // unchanged since the last fork
  *last_preload = preload ? preload : "";
  const auto kept = preload ? preload_without_kairos(preload) : std::nullopt;
  child_preload_entry = kept ? strdup(("LD_PRELOAD=" + *kept).c_str()) : nullptr;
}

void remove_kairos_from_environment_in_child() noexcept {
  if (!environ || !child_preload_entry) return;
  for (char** entry = environ; *entry; ++entry)
    if (std::strncmp(*entry, "LD_PRELOAD=", 11) == 0) {
      *entry = const_cast<char*>(child_preload_entry);
      return;
    }
}

std::optional<std::string> kairos_variable(setting which) {
  const std::string name{definition_of(which).variable};
  const std::string prefix = name + "=";
  if (kept_variables) {
    for (const auto& assignment : *kept_variables)
      if (assignment.starts_with(prefix)) return assignment.substr(prefix.size());
    return std::nullopt;
  }
  return environment_value_if_set(which);
}

exec_environment environment_for_exec(char* const* environment, bool profiled, bool strip,
                                      std::string_view generation) {
  exec_environment result;
  if (!profiled && !strip) return result;
  // Followed, with kairos out of environ: its variables and its LD_PRELOAD entry come back, over
  // any the program's environment holds.
  const bool put_back = profiled && kept_variables;
  bool preload_seen = false;
  for (auto entry = environment; entry && *entry; ++entry) {
    std::string_view assignment{*entry};
    if (assignment.starts_with("KAIROS_EXEC_GENERATION=")) continue;
    if (put_back && is_setting_variable(assignment.substr(0, assignment.find('=')))) continue;
    if (assignment.starts_with(cuda_injection_prefix) &&
        is_this_library(assignment.substr(cuda_injection_prefix.size())))
      continue;
    if (!profiled && names_this_library_for_annotations(assignment)) continue;
    if (put_back && assignment.starts_with("LD_PRELOAD=")) {
      preload_seen = true;
      const auto preload = assignment.substr(11);
      if (!preload_without_kairos(preload)) {  // kairos not in it: first, as kairos-run puts it
        result.storage.push_back("LD_PRELOAD=" + paths->own + (preload.empty() ? "" : ":") + std::string{preload});
        continue;
      }
    }
    if (strip && assignment.starts_with("LD_PRELOAD=")) {
      auto kept = preload_without_kairos(assignment.substr(11));
      if (kept && kept->empty()) continue;
      if (kept) {
        result.storage.push_back("LD_PRELOAD=" + *kept);
        continue;
      }
    }
    result.storage.emplace_back(assignment);
  }
  if (put_back) {
    if (!preload_seen) result.storage.push_back("LD_PRELOAD=" + paths->own);
    for (const auto& assignment : *kept_variables)
      if (!assignment.starts_with("KAIROS_EXEC_GENERATION=")) result.storage.push_back(assignment);
  }
  if (profiled) result.storage.push_back("KAIROS_EXEC_GENERATION=" + std::string{generation});
  for (auto& text : result.storage) result.pointers.push_back(text.data());
  result.pointers.push_back(nullptr);
  return result;
}

}  // namespace kairos::runtime
