// kairos-avail: what kairos can measure here. --components (name, available here, description,
// unit), --settings (variable, current value, type, default, category, description),
// --hw-counters (perf events and PAPI presets, available or not and why). Filters: --regex on
// names, --category; --json for all of it.
#include <cstdlib>
#include <iostream>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <kairos/component_traits.hpp>
#include <kairos/components.hpp>
#include <kairos/runtime/process_metrics.hpp>
#include <kairos/runtime/settings.hpp>
#include <kairos/runtime/time_windows.hpp>

#if defined(KAIROS_AVAIL_HAS_PERF)
#include <kairos/plugins/perf.hpp>
#endif
#if defined(KAIROS_AVAIL_HAS_PAPI)
#include <kairos/plugins/papi.hpp>
#endif
#if defined(KAIROS_AVAIL_HAS_GPU)
#include <dlfcn.h>

#include <kairos/plugins/gpu.hpp>
#endif

extern char** environ;

namespace {

struct row {
  std::string name;
  std::string category;
  nlohmann::json fields;  // every column, for --json and the table
};

template <class Component>
row component_row(std::string category) {
  const bool available = kairos::available_now<Component>();
  return {std::string{kairos::label_of<Component>()}, category,
          nlohmann::json{{"name", kairos::label_of<Component>()},
                         {"available", available},
                         {"unit", kairos::unit_of<Component>()},
                         {"category", category},
                         {"description", kairos::description_of<Component>()},
                         {"reason", available ? std::string{} : kairos::unavailable_reason_of<Component>()}}};
}

std::vector<row> component_rows() {
  std::vector<row> rows;
  [&]<class... Components>(std::tuple<Components...>*) {
    (rows.push_back(component_row<Components>("core")), ...);
  }(static_cast<kairos::builtin_components*>(nullptr));
#if defined(KAIROS_AVAIL_HAS_PERF)
  rows.push_back(component_row<kairos::perf_counters>("perf"));
#endif
#if defined(KAIROS_AVAIL_HAS_PAPI)
  rows.push_back(component_row<kairos::papi_vector>("papi"));
#endif
#if defined(KAIROS_AVAIL_HAS_GPU)
  // The GPU components observe a runtime the program has loaded: "available here" means this
  // machine has one that sees a device, so kairos-avail loads them as a program would.
  for (const char* runtime : {"libamdhip64.so.5", "libamdhip64.so.6", "libcuda.so.1"})
    dlopen(runtime, RTLD_NOW | RTLD_GLOBAL);
  rows.push_back(component_row<kairos::gpu_kernel_time>("gpu"));
  rows.push_back(component_row<kairos::gpu_memcpy_time>("gpu"));
  rows.push_back(component_row<kairos::gpu_memcpy_bytes>("gpu"));
  rows.push_back(component_row<kairos::gpu_api_time>("gpu"));
#endif
  return rows;
}

std::vector<row> setting_rows() {
  const auto current = kairos::runtime::settings::load(environ);
  std::vector<row> rows;
  for (const auto& value : current.values()) {
    const auto& definition = *value.definition;
    const auto category = kairos::runtime::definition_of(definition.category).name;
    rows.push_back({std::string{definition.variable}, std::string{category},
                    nlohmann::json{{"variable", definition.variable},
                                   {"name", definition.name},
                                   {"value", value.text},
                                   {"source", kairos::runtime::source_name(value.source)},
                                   {"type", kairos::runtime::type_name(definition.type)},
                                   {"default", definition.default_value},
                                   {"category", category},
                                   {"choices", definition.choices},
                                   {"description", definition.description}}});
  }
  for (const auto& problem : current.problems()) std::cerr << problem << '\n';
  return rows;
}

// Text in a Markdown table cell: '|' would end the cell, '<stem>' would read as an HTML tag.
std::string markdown_cell(std::string_view text) {
  std::string cell;
  for (const char c : text) {
    if (c == '\\' || c == '|' || c == '<' || c == '>' || c == '*') cell += '\\';
    cell += c;
  }
  return cell;
}

// docs/settings.md's two tables, from the registry alone (defaults, never this environment's
// values): what a bad value of each category does, and every setting. A test compares them with
// the document.
std::string settings_markdown() {
  using kairos::runtime::setting_type;
  std::string text = "| category | what a bad value does (the end of its line) |\n|---|---|\n";
  for (const auto& category : kairos::runtime::setting_categories())
    text += fmt::format("| `{}` | {} |\n", category.name, category.when_rejected);
  text +=
      "\n| variable | key | type | default | category | accepted | description |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& definition : kairos::runtime::setting_definitions()) {
    std::string accepted;
    for (const auto& choice : kairos::runtime::split_list(definition.choices))
      accepted += fmt::format("{}`{}`", accepted.empty() ? "" : ", ", choice);
    if (definition.type == setting_type::integer || definition.type == setting_type::number)
      accepted = fmt::format("[{}, {}]", definition.minimum, definition.maximum);
    text += fmt::format("| `{}` | `{}` | {} | {} | {} | {} | {} |\n", definition.variable, definition.name,
                        kairos::runtime::type_name(definition.type),
                        definition.default_value.empty() ? "(empty)" : fmt::format("`{}`", definition.default_value),
                        kairos::runtime::definition_of(definition.category).name, accepted.empty() ? "-" : accepted,
                        markdown_cell(definition.description));
  }
  return text;
}

// The time windows' clocks (docs/windows.md), with whether each can run here.
std::vector<row> window_clock_rows() {
  using kairos::runtime::window_clock;
  struct described {
    window_clock clock;
    const char* unit;
    const char* description;
  };
  const described clocks[] = {
      {window_clock::realtime, "s (ms, us, ns)", "wall-clock time since the process started"},
      {window_clock::monotonic, "s (ms, us, ns)", "like realtime, immune to clock changes"},
      {window_clock::process_cputime, "s (ms, us, ns)",
       "CPU time of all the process's threads; stands still while it sleeps"},
      {window_clock::thread_cputime, "s (ms, us, ns)", "CPU time of the main thread"},
      {window_clock::instructions, "count (K, M, G)",
       "user-space instructions retired by the process (perf_event, needs a PMU)"},
  };
  std::vector<row> rows;
  for (const auto& [clock, unit, description] : clocks) {
    bool available = true;
    std::string reason;
#if defined(KAIROS_AVAIL_HAS_PERF)
    if (clock == window_clock::instructions) {
      const auto& probe = kairos::perf::probe_catalog()[kairos::perf::find_event("instructions")];
      available = probe.available;
      reason = probe.unavailable_reason;
    }
#endif
    const std::string name{kairos::runtime::clock_name(clock)};
    rows.push_back({name, "windows",
                    nlohmann::json{{"name", name},
                                   {"available", available},
                                   {"unit", unit},
                                   {"category", "windows"},
                                   {"description", description},
                                   {"reason", reason}}});
  }
  return rows;
}

constexpr const char* window_examples =
    "  KAIROS_TRACE_PERIODS (kairos-run --periods) examples:\n"
    "    realtime:10:1:5                    five times: 10 s off, then 1 s on\n"
    "    10:1:5:realtime                    the same, clock last\n"
    "    realtime:2:1 process_cputime:0:3   2 s off, 1 s on; then 3 s of CPU time\n"
    "    monotonic:9:1:0                    1 s in every 10, until exit\n"
    "    instructions:90M:10M:0             10 M instructions in every 100 M\n"
    "  KAIROS_TRACE_WINDOWS_FILE (kairos-run --windows-file): lines clock,start,length, e.g.\n"
    "    realtime,1.5,250ms                 # from 1.5 s to 1.75 s after the start\n"
    "  docs/windows.md has the rest: precision, the window table, kairos-report --window\n\n";

// What process sampling can read here (KAIROS_PROCESS_SAMPLING_CPU_ROOT as the settings have it):
// where each metric comes from, or why it is absent.
std::vector<row> process_metric_rows() {
  const auto current = kairos::runtime::settings::load(environ);
  std::vector<row> rows;
  for (const auto& probe :
       kairos::runtime::probe_process_metrics(current.text(kairos::runtime::setting::process_sampling_cpu_root))) {
    const auto& definition = kairos::runtime::definition_of(probe.metric);
    rows.push_back({std::string{definition.name}, "process",
                    nlohmann::json{{"name", definition.name},
                                   {"available", probe.available},
                                   {"category", "process"},
                                   {"unit", definition.unit},
                                   {"description", definition.description},
                                   {"detail", probe.detail}}});
  }
  return rows;
}

std::vector<row> counter_rows() {
  std::vector<row> rows;
#if defined(KAIROS_AVAIL_HAS_PERF)
  const auto& probes = kairos::perf::probe_catalog();
  for (std::size_t i = 0; i < kairos::perf::event_catalog.size(); ++i) {
    const auto& event = kairos::perf::event_catalog[i];
    const std::string category = event.kind == kairos::perf::event_kind::software   ? "perf-software"
                                 : event.kind == kairos::perf::event_kind::hardware ? "perf-hardware"
                                                                                    : "perf-cache";
    rows.push_back({std::string{event.name}, category,
                    nlohmann::json{{"name", event.name},
                                   {"available", probes[i].available},
                                   {"category", category},
                                   {"unit", event.unit},
                                   {"description", event.description},
                                   {"reason", probes[i].unavailable_reason}}});
  }
#endif
#if defined(KAIROS_AVAIL_HAS_PAPI) && defined(KAIROS_PAPI_FOUND) && KAIROS_PAPI_FOUND
  if (const kairos::problem& failure = kairos::papi::library_problem()) {
    rows.push_back({"PAPI", "papi",
                    nlohmann::json{{"name", "PAPI"},
                                   {"available", false},
                                   {"category", "papi"},
                                   {"unit", ""},
                                   {"description", "PAPI presets"},
                                   {"reason", failure.text()}}});
  } else {
    int code = PAPI_PRESET_MASK;
    if (PAPI_enum_event(&code, PAPI_ENUM_FIRST) == PAPI_OK) do {
        char name[PAPI_MAX_STR_LEN] = {};
        if (PAPI_event_code_to_name(code, name) != PAPI_OK) continue;
        PAPI_event_info_t info{};
        PAPI_get_event_info(code, &info);
        kairos::papi::event_resolution resolution;
        try {
          resolution = kairos::papi::resolve_event(name);
        } catch (const std::exception& error) {
          resolution.unavailable_reason = error.what();
        }
        rows.push_back({name, "papi",
                        nlohmann::json{{"name", name},
                                       {"available", resolution.available},
                                       {"category", "papi"},
                                       {"unit", "count"},
                                       {"description", info.long_descr},
                                       {"reason", resolution.unavailable_reason}}});
      } while (PAPI_enum_event(&code, PAPI_ENUM_EVENTS) == PAPI_OK);
  }
#endif
  return rows;
}

std::string text_of(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  return value.dump();
}

void print_table(const std::string& title, const std::vector<row>& rows, const std::vector<std::string>& columns) {
  std::cout << title << '\n';
  std::vector<std::size_t> widths;
  for (const auto& column : columns) {
    std::size_t width = column.size();
    if (column != "description" && column != "reason")
      for (const auto& entry : rows) width = std::max(width, text_of(entry.fields[column]).size());
    widths.push_back(width);
  }
  auto print_row = [&](auto cell) {
    std::string line;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const auto text = cell(c);
      line += c + 1 == columns.size() ? text : fmt::format("{:<{}}  ", text, widths[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << '\n';
  };
  print_row([&](std::size_t c) {
    std::string upper = columns[c];
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return upper;
  });
  for (const auto& entry : rows) print_row([&](std::size_t c) { return text_of(entry.fields[columns[c]]); });
  std::cout << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kairos-avail: the components, settings and hardware counters kairos offers here", "kairos-avail"};
  bool components = false, settings = false, counters = false, windows = false, process_metrics = false, json = false,
       markdown = false;
  std::string name_regex, category;
  app.add_flag("-C,--components", components, "components: name, available here, unit, description");
  app.add_flag("-S,--settings", settings, "settings: variable, current value, type, default, category, description");
  app.add_flag("-H,--hw-counters", counters, "perf events and PAPI presets: available here or not, and why");
  app.add_flag("-W,--windows", windows, "time windows: their clocks, available here or not, and examples");
  app.add_flag("-P,--process-metrics", process_metrics,
               "process sampling's metrics: available here or not, where each is read or why not");
  app.add_option("-r,--regex", name_regex, "only names matching this regular expression");
  std::string setting_categories;
  for (const auto& entry : kairos::runtime::setting_categories())
    setting_categories += fmt::format("{}{}", setting_categories.empty() ? "" : ", ", entry.name);
  app.add_option("-c,--category", category,
                 fmt::format("only this category (core, perf, papi, gpu, process; {}; perf-software, "
                             "perf-hardware, perf-cache)",
                             setting_categories));
  auto* json_flag = app.add_flag("--json", json, "JSON instead of tables");
  app.add_flag("--markdown", markdown,
               "only the settings, as docs/settings.md's tables: what a bad value of each category "
               "does, and every setting with its default")
      ->excludes(json_flag);
  CLI11_PARSE(app, argc, argv);
  if (markdown) {
    std::cout << settings_markdown();
    return 0;
  }
  if (!components && !settings && !counters && !windows && !process_metrics)
    components = settings = counters = windows = process_metrics = true;

  std::regex pattern;
  try {
    pattern = std::regex{name_regex.empty() ? ".*" : name_regex, std::regex::icase};
  } catch (const std::regex_error& error) {
    std::cerr << fmt::format("[kairos] --regex \"{}\" is not a valid regular expression ({})\n", name_regex,
                             error.what());
    return 2;
  }
  auto filtered = [&](std::vector<row> rows) {
    std::erase_if(rows, [&](const row& entry) {
      return !std::regex_search(entry.name, pattern) || (!category.empty() && entry.category != category);
    });
    return rows;
  };

  nlohmann::json document = nlohmann::json::object();
  auto emit = [&](const char* key, const std::string& title, std::vector<row> rows,
                  const std::vector<std::string>& columns) {
    if (json) {
      auto& list = document[key] = nlohmann::json::array();
      for (const auto& entry : rows) list.push_back(entry.fields);
    } else {
      print_table(title, rows, columns);
    }
  };
  if (components)
    emit("components", "COMPONENTS", filtered(component_rows()),
         {"name", "available", "unit", "category", "description", "reason"});
  if (settings)
    emit("settings", "SETTINGS", filtered(setting_rows()),
         {"variable", "value", "type", "default", "category", "description"});
  if (windows) {
    emit("window_clocks", "TIME WINDOW CLOCKS", filtered(window_clock_rows()),
         {"name", "available", "unit", "description", "reason"});
    if (!json) std::cout << window_examples;
  }
  if (process_metrics)
    emit("process_metrics", "PROCESS METRICS", filtered(process_metric_rows()),
         {"name", "available", "unit", "detail"});
  if (counters)
    emit("hw_counters", "HARDWARE COUNTERS", filtered(counter_rows()),
         {"name", "available", "category", "description", "reason"});
  if (json) std::cout << document.dump(2) << '\n';
  return 0;
}
