#pragma once
// From an event name (a preset such as PAPI_TOT_INS, or a native name such as
// perf::INSTRUCTIONS or sde:::lib::counter) to its PAPI code, and whether it can count here.
#include <papi.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include <kairos/plugins/papi/library.hpp>

namespace kairos::papi {

struct event_resolution {
  int code = PAPI_NULL;
  int component_index = -1;
  bool available = false;
  std::string unavailable_reason;  // "PAPI: PAPI_TOT_INS: component perf_event disabled: ..."
};

// Every preset PAPI defines (available here or not), for error messages.
inline std::string preset_names() {
  std::string names;
  int code = PAPI_PRESET_MASK;
  if (PAPI_enum_event(&code, PAPI_ENUM_FIRST) != PAPI_OK) return names;
  do {
    char name[PAPI_MAX_STR_LEN] = {};
    if (PAPI_event_code_to_name(code, name) != PAPI_OK) continue;
    if (!names.empty()) names += ", ";
    names += name;
  } while (PAPI_enum_event(&code, PAPI_ENUM_EVENTS) == PAPI_OK);
  return names;
}

// Why no component can resolve native names: each disabled component's own reason.
inline std::string disabled_components() {
  std::string reasons;
  for (int component = 0; component < PAPI_num_components(); ++component) {
    const std::string reason = component_disabled_reason(component);
    if (reason.empty()) continue;
    if (!reasons.empty()) reasons += "; ";
    reasons += reason;
  }
  return reasons;
}

// Resolves `name` and tries it in a scratch event set. A misspelt preset (the list of presets is
// fixed) throws std::invalid_argument naming the input and the valid presets. A native name PAPI
// cannot resolve may be a typo or belong to a disabled component, so it comes back unavailable
// with PAPI's answer and each disabled component's reason, as does a real event that cannot count.
inline event_resolution resolve_event(std::string_view name) {
  event_resolution result;
  const std::string name_text{name};
  if (const problem& failure = library_problem()) {
    result.unavailable_reason = "PAPI: " + failure.text();
    return result;
  }
  papi_used_on_this_thread();
  const int found = PAPI_event_name_to_code(name_text.c_str(), &result.code);
  if (found != PAPI_OK) {
    if (name.starts_with("PAPI_"))
      throw std::invalid_argument("papi: unknown preset '" + name_text + "'; valid presets: " + preset_names());
    const std::string disabled = disabled_components();
    result.unavailable_reason =
        "PAPI: " + name_text + ": no enabled component knows it (" + describe_error("PAPI_event_name_to_code", found) +
        "; papi_native_avail lists the native events here)" + (disabled.empty() ? "" : "; disabled: " + disabled);
    return result;
  }
  PAPI_event_info_t info{};
  if (PAPI_get_event_info(result.code, &info) == PAPI_OK)
    result.component_index = static_cast<int>(info.component_index);

  int scratch = PAPI_NULL;
  int added = PAPI_create_eventset(&scratch);
  if (added == PAPI_OK) {
    added = PAPI_add_event(scratch, result.code);
    PAPI_cleanup_eventset(scratch);
    PAPI_destroy_eventset(&scratch);
  }
  if (added == PAPI_OK) {
    result.available = true;
    return result;
  }
  std::string why = describe_error("PAPI_add_event", added);
  if (result.component_index >= 0) {
    const std::string disabled = component_disabled_reason(result.component_index);
    if (!disabled.empty()) why = disabled + " (" + why + ")";
  }
  if (added == PAPI_ENOEVNT) why += ": this CPU does not provide it (papi_avail lists what does)";
  result.unavailable_reason = "PAPI: " + name_text + ": " + why;
  return result;
}

}  // namespace kairos::papi
