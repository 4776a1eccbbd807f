#pragma once
// Every output format kairos writes, one row each: the one list that kairos-run's
// KAIROS_OUTPUT_FORMATS, kairos-report's -f, `python3 -m kairos`, every help text and
// docs/outputs.md read. Header-only data (no SQLite, no writer), so that the settings registry and
// the tools' argument parsers can include it; the writers are dispatched by write_format
// (outputs.hpp), whose table of functions is checked against this one.
//
// A new format is a row here, its enumerator, its writer in src/<name>.cpp with its entry in
// src/formats.cpp, a test and a line in docs/outputs.md (docs/contributing.md).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kairos::database {

enum class format_id : std::uint8_t {
  db,
  text,
  trace,
  perfetto,
  folded,
  speedscope,
  flamegraph,
  html,
  json,
  coz,
  causal_svg,
  count  // not a format: the number of rows
};

struct format_row {
  format_id id;
  std::string_view name;         // as KAIROS_OUTPUT_FORMATS and kairos-report -f spell it
  std::string_view extension;    // appended to kairos-run's output stem
  std::string_view description;  // what the file is, what opens it
  bool at_exit;                  // kairos-run writes it at exit when KAIROS_OUTPUT_FORMATS names it
  bool from_database;            // kairos-report writes it from a profile database
  bool several_databases;        // kairos-report takes several databases, one after another
};

inline constexpr std::array<format_row, static_cast<std::size_t>(format_id::count)> formats{{
    {.id = format_id::db,
     .name = "db",
     .extension = ".db",
     .description = "the SQLite profile every other format derives from",
     .at_exit = true,
     .from_database = false,
     .several_databases = false},
    {.id = format_id::text,
     .name = "text",
     .extension = ".txt",
     .description = "the text report: top functions, call graph, ranks, windows",
     .at_exit = true,
     .from_database = true,
     .several_databases = true},
    {.id = format_id::trace,
     .name = "trace",
     .extension = ".trace.json",
     .description = "Chrome Trace Event JSON, for Perfetto UI and chrome://tracing",
     .at_exit = true,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::perfetto,
     .name = "perfetto",
     .extension = ".perfetto-trace",
     .description = "Perfetto's own protobuf trace, interned and streamed: tens of bytes a sample",
     .at_exit = true,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::folded,
     .name = "folded",
     .extension = ".folded",
     .description = "folded stacks for flamegraph.pl and speedscope",
     .at_exit = true,
     .from_database = true,
     .several_databases = true},
    {.id = format_id::speedscope,
     .name = "speedscope",
     .extension = ".speedscope.json",
     .description = "speedscope's own format",
     .at_exit = true,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::flamegraph,
     .name = "flamegraph",
     .extension = ".svg",
     .description = "a self-contained flame graph, SVG",
     .at_exit = true,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::html,
     .name = "html",
     .extension = ".html",
     .description = "a self-contained report page",
     .at_exit = true,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::json,
     .name = "json",
     .extension = ".json",
     .description = "the profile's summary as JSON; at exit, the run's report holding it as 'profile'",
     .at_exit = true,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::coz,
     .name = "coz",
     .extension = ".coz",
     .description = "a causal profile as coz's profile.coz",
     .at_exit = false,
     .from_database = true,
     .several_databases = false},
    {.id = format_id::causal_svg,
     .name = "causal-svg",
     .extension = ".causal.svg",
     .description = "a causal profile's charts, SVG",
     .at_exit = false,
     .from_database = true,
     .several_databases = false},
}};

// The formats kairos-run writes when KAIROS_OUTPUT_FORMATS is unset: the setting's default,
// kairos-run's help and the benchmarks' "default formats" read this list.
inline constexpr std::array default_exit_formats{format_id::db, format_id::text, format_id::trace};

// KAIROS_TRACE_MAX_BYTES' default: the Chrome trace adds no samples past this size (viewers do not
// open a JSON file much larger); the settings row spells the same number (checked there).
inline constexpr std::int64_t default_trace_max_bytes = 128ll << 20;

// Tracy's habit: the rows stand in the enum's order, so formats[id] is id's row.
constexpr bool rows_in_enum_order() {
  for (std::size_t index = 0; index < formats.size(); ++index)
    if (static_cast<std::size_t>(formats[index].id) != index) return false;
  return true;
}
static_assert(rows_in_enum_order(), "formats[] must list the formats in format_id's order");

constexpr const format_row& format_of(format_id id) { return formats[static_cast<std::size_t>(id)]; }

// The row named `name`; nullptr when no format has that name.
constexpr const format_row* find_format(std::string_view name) {
  for (const auto& row : formats)
    if (row.name == name) return &row;
  return nullptr;
}

namespace detail {

// Text assembled at compile time from the rows (the settings registry keeps string_views).
struct format_text {
  std::array<char, 1024> characters{};
  std::size_t size = 0;
  constexpr void append(std::string_view text) {
    for (char character : text) characters[size++] = character;
  }
  constexpr std::string_view view() const { return {characters.data(), size}; }
};

constexpr format_text exit_format_names() {
  format_text text;
  for (const auto& row : formats) {
    if (!row.at_exit) continue;
    if (text.size > 0) text.append(",");
    text.append(row.name);
  }
  return text;
}

constexpr format_text default_exit_format_names() {
  format_text text;
  for (const auto id : default_exit_formats) {
    if (text.size > 0) text.append(",");
    text.append(format_of(id).name);
  }
  return text;
}

constexpr format_text exit_format_descriptions() {
  format_text text;
  text.append("outputs written at exit: ");
  bool first = true;
  for (const auto& row : formats) {
    if (!row.at_exit) continue;
    if (!first) text.append(", ");
    first = false;
    text.append(row.name);
    text.append(" (<stem>");
    text.append(row.extension);
    text.append(", ");
    text.append(row.description);
    text.append(")");
  }
  return text;
}

inline constexpr format_text exit_names_storage = exit_format_names();
inline constexpr format_text default_exit_names_storage = default_exit_format_names();
inline constexpr format_text exit_descriptions_storage = exit_format_descriptions();

}  // namespace detail

// "db,text,trace,...": KAIROS_OUTPUT_FORMATS's accepted values.
inline constexpr std::string_view exit_format_names = detail::exit_names_storage.view();
// "db,text,trace": KAIROS_OUTPUT_FORMATS's default.
inline constexpr std::string_view default_exit_format_names = detail::default_exit_names_storage.view();
// KAIROS_OUTPUT_FORMATS's description: each format with its file name and what it is.
inline constexpr std::string_view exit_format_descriptions = detail::exit_descriptions_storage.view();

// The names of the formats kairos-report writes from a database, joined by `separator`.
inline std::string report_format_names(std::string_view separator) {
  std::string names;
  for (const auto& row : formats) {
    if (!row.from_database) continue;
    if (!names.empty()) names += separator;
    names += row.name;
  }
  return names;
}

// "text (the text report: ...), trace (...)": the formats `at_exit` (kairos-run) or written from
// a database (kairos-report), each with what it is, for help texts.
inline std::string format_help(bool at_exit) {
  std::string help;
  for (const auto& row : formats) {
    if (!(at_exit ? row.at_exit : row.from_database)) continue;
    if (!help.empty()) help += ", ";
    help += row.name;
    help += " (";
    help += row.description;
    help += ")";
  }
  return help;
}

}  // namespace kairos::database
