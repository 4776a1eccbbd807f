#include "preload/process/output_stem.hpp"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>

#include "preload/outputs/report.hpp"
#include "preload/process/environment.hpp"
#include "preload/process/run.hpp"
#include "preload/support/problems.hpp"

namespace kairos::runtime {
namespace {

constexpr int stem_suffixes_tried = 1000;

// The stem claimed, and by which process (a fork child claims its own). On the heap and never
// destroyed: the outputs may be written after static destructors ran.
struct claimed {
  pid_t pid = 0;
  std::string stem;
};
claimed* claim = nullptr;

}  // namespace

std::string stem_base() {
  const auto& values = this_run().values;
  auto path = path_values::of_this_process();
  if (auto date = kairos_variable(setting::launch_date); date && !date->empty()) path.launch_date = *date;
  auto expanded = expand_path(values.text(setting::output_path), path);
  auto base = expanded.has_value() ? std::move(expanded).value() : std::string{};
  if (base.empty() || base.back() == '/') {
    // "%env{UNSET}%", "dir/": no file name; never hidden files named ".db", ".txt".
    report(fmt::format("KAIROS_OUTPUT_PATH=\"{}\" gives no file name; writing {}{}-{}.* instead",
                       values.text(setting::output_path), base, path.exe, path.pid));
    base += fmt::format("{}-{}", path.exe, path.pid);
  }
  std::error_code error;
  if (!base.empty() && base.front() != '/') base = (std::filesystem::current_path(error) / base).string();
  return base;
}

std::string free_stem(const std::string& base) {
  auto formats = this_run().formats;
  formats.push_back("db");
  auto stem = base;
  for (int suffix = 1; suffix <= stem_suffixes_tried && !stem_is_free(stem, formats); ++suffix)
    stem = fmt::format("{}-{}", base, suffix);
  return stem;
}

const std::string& claimed_stem() {
  if (!claim) claim = new claimed{};
  if (claim->pid == getpid()) return claim->stem;
  claim->pid = getpid();
  // The images of an exec chain write one profile, under the stem the first of them claimed.
  const auto& identity = this_run().identity;
  if (!identity.chain_stem.empty() && identity.pid == getpid()) {
    claim->stem = identity.chain_stem;
    return claim->stem;
  }
  claim->stem = free_stem(stem_base());
  return claim->stem;
}

std::string database_path_of_this_process() { return claimed_stem() + ".db"; }

std::string stem_of_chain_end(std::string stem, std::string& database_path) {
  const auto base = stem_base();
  if (stem.starts_with(base) || database_path.empty()) return stem;
  const auto own = free_stem(base);
  std::error_code error;
  std::filesystem::rename(database_path, own + ".db", error);
  if (error) return stem;
  database_path = own + ".db";
  return own;
}

}  // namespace kairos::runtime
