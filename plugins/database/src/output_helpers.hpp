#pragma once
// What the output writers (outputs.cpp, speedscope.cpp) share: one-value queries, the time-window
// filter, and names as JSON strings.
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/plugins/database/outputs.hpp>
#include <kairos/printable.hpp>

namespace kairos::database::output_helpers {

inline std::int64_t scalar(connection& profile, const std::string& sql) {
  auto query = profile.prepare(sql);
  return query.step() ? query.integer(0) : 0;
}

// " AND <column> BETWEEN first AND last", or nothing for every window. Integers only: no quoting.
inline std::string in_windows(const window_range& windows, std::string_view column) {
  if (windows.all) return {};
  return fmt::format(" AND {} BETWEEN {} AND {}", column, windows.first, windows.last);
}

// Every name in a JSON output: shown as kairos::printable shows it (escaped, capped).
inline std::string json_string(std::string_view text) {
  return nlohmann::json(printable(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// How every output names a thread: "thread 2 (tid 4243, worker)" (the name as the kernel kept it).
inline std::string thread_label(std::int64_t sequent_id, std::int64_t tid, std::string_view name) {
  return fmt::format("thread {} (tid {}{}{})", sequent_id, tid, name.empty() ? "" : ", ", name);
}

}  // namespace kairos::database::output_helpers
