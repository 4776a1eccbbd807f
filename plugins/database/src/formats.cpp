// The writer of each format in formats.hpp's table, in the same order: kairos-report, the Python
// package and kairos-run's exit all dispatch through write_format.
#include <kairos/plugins/database/formats.hpp>

#include <stdexcept>
#include <string>

#include <kairos/plugins/database/causal.hpp>
#include <kairos/plugins/database/outputs.hpp>

namespace kairos::database {
namespace {

using writer = void (*)(connection&, std::ostream&, const window_range&);

// The speedscope file and the HTML page name their writer ("kairos 0.1.0").
constexpr std::string_view generator = "kairos " KAIROS_VERSION;

struct writer_row {
  format_id id;
  writer write;  // nullptr: the format is the database itself
};

constexpr writer_row writers[] = {
    {format_id::db, nullptr},
    {format_id::text, [](connection& p, std::ostream& o, const window_range& w) { write_text(p, o, {.windows = w}); }},
    {format_id::trace, [](connection& p, std::ostream& o, const window_range& w) { write_trace(p, o, w); }},
    {format_id::perfetto, [](connection& p, std::ostream& o, const window_range& w) { write_perfetto(p, o, w); }},
    {format_id::folded, [](connection& p, std::ostream& o, const window_range& w) { write_folded(p, o, w); }},
    {format_id::speedscope,
     [](connection& p, std::ostream& o, const window_range& w) { write_speedscope(p, o, w, generator); }},
    {format_id::flamegraph, [](connection& p, std::ostream& o, const window_range& w) { write_flamegraph(p, o, w); }},
    {format_id::html, [](connection& p, std::ostream& o, const window_range& w) { write_html(p, o, w, generator); }},
    {format_id::json,
     [](connection& p, std::ostream& o, const window_range& w) { write_summary_json(p, o, {.windows = w}); }},
    {format_id::coz, [](connection& p, std::ostream& o, const window_range& w) { write_coz_profile(p, o, w); }},
    {format_id::causal_svg,
     [](connection& p, std::ostream& o, const window_range& w) { write_causal_svg(p, o, 10, w); }},
};

constexpr bool writers_match_formats() {
  if (std::size(writers) != formats.size()) return false;
  for (std::size_t index = 0; index < formats.size(); ++index)
    if (writers[index].id != formats[index].id || (writers[index].write != nullptr) != formats[index].from_database)
      return false;
  return true;
}
static_assert(writers_match_formats(),
              "writers[] must give each format of formats.hpp, in its order, a writer exactly when it is "
              "written from the database");

}  // namespace

void write_format(format_id format, connection& profile, std::ostream& out, const window_range& windows) {
  const auto write = writers[static_cast<std::size_t>(format)].write;
  if (write == nullptr)
    throw std::invalid_argument{std::string{"the "} + std::string{format_of(format).name} +
                                " format is the profile database itself, not written from one"};
  write(profile, out, windows);
}

}  // namespace kairos::database
