#include "preload/outputs/report.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <optional>
#include <ostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/schema.hpp>
#include <kairos/printable.hpp>
#include <kairos/report.hpp>
#include <kairos/report_json.hpp>

#include "preload/support/private_descriptor.hpp"
#include "preload/threads/thread_registry.hpp"

namespace kairos::runtime {
namespace {

constexpr int runtime_report_version = 1;
constexpr std::size_t thread_rows_shown = 64;

nlohmann::json threads_json() {
  auto list = nlohmann::json::array();
  threads().for_each([&](const thread_record& record) {
    list.push_back({{"internal_id", record.internal_id},
                    {"sequent_id", record.sequent_id},
                    {"tid", record.tid},
                    {"name", printable(record.name_text())},
                    {"kairos_owned", record.kairos_owned},
                    {"start_ns", record.start_ns},
                    {"end_ns", record.end_ns.load()},
                    {"running", record.running.load()}});
  });
  return list;
}

std::string threads_text() {
  std::string text = fmt::format("{:>10} {:>10} {:>8}  {:<16} {}\n", "SEQUENT", "INTERNAL", "TID", "NAME", "OWNER");
  std::size_t rows = 0;
  threads().for_each([&](const thread_record& record) {
    if (++rows > thread_rows_shown) return;
    text += fmt::format("{:>10} {:>10} {:>8}  {:<16} {}\n", record.sequent_id, record.internal_id, record.tid,
                        printable(record.name_text()), record.kairos_owned ? "kairos" : "program");
  });
  if (rows > thread_rows_shown)
    text += fmt::format("... {} more threads (all of them in the JSON output)\n", rows - thread_rows_shown);
  return text;
}

// The nodes of `tree` that `keep` accepts, each under its nearest kept ancestor, equal paths
// merged, in depth-first order (as format_report prints them).
template <class Keep>
kairos::report_tree kept_nodes(const kairos::report_tree& tree, const std::vector<kairos::component_info>& components,
                               Keep&& keep) {
  std::vector<kairos::report_node> nodes;                // kept, in the order first seen
  std::vector<std::int64_t> kept_as(tree.nodes.size());  // each node: itself or its nearest kept ancestor (-1)
  std::map<std::pair<std::int64_t, std::string>, std::int64_t> by_path;
  for (std::size_t i = 0; i < tree.nodes.size(); ++i) {  // parents come before their children
    const auto& node = tree.nodes[i];
    const auto parent = node.parent < 0 ? -1 : kept_as[static_cast<std::size_t>(node.parent)];
    if (!keep(node.label)) {
      kept_as[i] = parent;
      continue;
    }
    auto [found, added] = by_path.try_emplace({parent, node.label}, static_cast<std::int64_t>(nodes.size()));
    kept_as[i] = found->second;
    if (added) {
      auto& copy = nodes.emplace_back(node);
      copy.parent = parent;
      copy.children.clear();
      continue;
    }
    auto& into = nodes[static_cast<std::size_t>(found->second)];
    for (const auto& value : node.values) {
      const auto same = std::find_if(into.values.begin(), into.values.end(), [&](const kairos::report_value& other) {
        return other.component == value.component && other.value_index == value.value_index;
      });
      if (same == into.values.end())
        into.values.push_back(value);
      else
        same->stats.merge(value.stats);
    }
  }
  kairos::report_tree kept{tree.thread_index, tree.os_thread_id, {}};
  std::vector<std::vector<std::int64_t>> children(nodes.size());
  std::vector<std::int64_t> pending;
  for (auto i = static_cast<std::int64_t>(nodes.size()) - 1; i >= 0; --i) {  // popped lowest first
    const auto parent = nodes[static_cast<std::size_t>(i)].parent;
    (parent < 0 ? pending : children[static_cast<std::size_t>(parent)]).push_back(i);
  }
  std::vector<std::int64_t> position(nodes.size());
  while (!pending.empty()) {
    const auto index = static_cast<std::size_t>(pending.back());
    pending.pop_back();
    position[index] = static_cast<std::int64_t>(kept.nodes.size());
    auto& node = kept.nodes.emplace_back(std::move(nodes[index]));
    if (node.parent >= 0) {
      node.parent = position[static_cast<std::size_t>(node.parent)];
      auto& parent = kept.nodes[static_cast<std::size_t>(node.parent)];
      node.depth = parent.depth + 1;
      parent.children.push_back(static_cast<std::uint32_t>(position[index]));
    } else {
      node.depth = 0;
    }
    for (auto child : children[index]) pending.push_back(child);
  }
  for (auto& node : kept.nodes)
    for (auto& value : node.values) {
      value.self_sum = value.stats.sum;
      if (value.component >= components.size() || !components[value.component].additive) continue;
      for (auto child : node.children)
        if (const auto* below = kept.nodes[child].value(value.component, value.value_index))
          value.self_sum -= below->stats.sum;
    }
  return kept;
}

// The in-memory regions' tables: the user API's, then each annotation kind's under its own
// heading (a region of one kind inside another's is shown under its nearest region of its kind).
std::string region_tables(const kairos::report_data& data,
                          const std::map<std::string, std::string, std::less<>>& region_kinds) {
  constexpr std::pair<std::string_view, std::string_view> headings[] = {{"", "user-API regions"},
                                                                        {"openmp", "OpenMP regions"},
                                                                        {"nvtx", "NVTX ranges"},
                                                                        {"kokkos", "Kokkos regions"},
                                                                        {"roctx", "ROCTx ranges"}};
  std::string text;
  for (const auto& [kind, heading] : headings) {
    const auto keep = [&](const std::string& label) {
      const auto found = region_kinds.find(label);
      return (found == region_kinds.end() ? std::string_view{} : std::string_view{found->second}) == kind;
    };
    kairos::report_data of_kind{data.components, kept_nodes(data.process, data.components, keep), {}};
    for (const auto& thread : data.threads) of_kind.threads.push_back(kept_nodes(thread, data.components, keep));
    if (auto tables = kairos::format_report(of_kind, {.per_thread = true}); !tables.empty())
      text += fmt::format("{}{}, by component\n{}", text.empty() ? "" : "\n", heading, tables);
  }
  return text;
}

// The profile summary as JSON.
nlohmann::json profile_summary(database::connection& profile) {
  std::ostringstream text;
  database::write_summary_json(profile, text);
  return nlohmann::json::parse(text.str());
}

// Writes `path` through `write(std::ostream&)`: a temporary file beside it, renamed into place
// only when complete.
template <class Write>
problem write_output(const std::string& path, Write&& write) {
  std::error_code ignored;
  const auto directory = std::filesystem::path{path}.parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory, ignored);
  std::string temporary = path + ".kairos-XXXXXX";
  const int fd = move_above_floor(mkostemp(temporary.data(), O_CLOEXEC));
  if (fd < 0) return problem{fmt::format("cannot create {}: {}", path, std::strerror(errno))};
  fchmod(fd, 0644);
  bool complete = false;
  auto failure = capture_problem(fmt::format("writing {} failed", path), [&] {
    __gnu_cxx::stdio_filebuf<char> buffer{fd, std::ios::out | std::ios::binary};
    std::ostream stream{&buffer};
    write(stream);
    stream.flush();
    complete = static_cast<bool>(stream) && buffer.close() != nullptr;  // close reports ENOSPC
    if (!complete) throw std::runtime_error{std::strerror(errno ? errno : EIO)};
  });
  if (!failure) failure = rename_without_replacing(temporary, path);
  if (failure) unlink(temporary.c_str());
  return failure;
}

// What an exit writer knows: the request, the regions read from memory, the file it writes, and
// the database (opened once, by the first writer that reads it: each open parses the schema again).
struct exit_output {
  const report_request& request;
  const kairos::report_data& regions;
  std::string database_path;  // "" when the run wrote none
  std::optional<database::connection>& opened;
  std::string path;  // the file being written
  written_report& written;

  bool have_database() const { return !database_path.empty(); }
  database::connection& profile() const {
    if (!opened) opened.emplace(database::open_profile(database_path));
    return *opened;
  }
};

// The text report: what only the running process knows (its command, end, in-memory regions with
// every component KAIROS_COMPONENTS measures, threads) around the database's (kairos-report's text,
// whose call graph has the regions' wall time beside the instrumented functions).
void write_text_report(const exit_output& output, std::ostream& file) {
  const auto& request = output.request;
  file << fmt::format("kairos report (version {})\ncommand: {}\npid: {}  ended by: {}\n\n", runtime_report_version,
                      printable(request.command_line), getpid(), request.end_reason);
  if (output.have_database()) {
    database::write_text(output.profile(), file);
    file << "\n";
  }
  file << region_tables(output.regions, request.region_kinds);
  if (request.mismatched_pops > 0)
    file << fmt::format("\nmismatched kairos_pop_region calls ignored: {}\n", request.mismatched_pops);
  file << "\nthreads\n" << threads_text();
}

// The run's report as JSON: what only the running process knows, the profile's summary (the json
// format of kairos-report) as its 'profile'.
void write_json_report(const exit_output& output, std::ostream& file) {
  const auto& request = output.request;
  nlohmann::json document{
      {"kairos_report_version", runtime_report_version},
      {"command", printable(request.command_line)},
      {"pid", getpid()},
      {"ppid", getppid()},
      {"end_reason", request.end_reason},
      {"regions_recorded", request.regions_recorded},
      {"mismatched_pops", request.mismatched_pops},
      {"threads", threads_json()},
      {"regions", kairos::to_json(output.regions)},
      {"profile", output.have_database() ? profile_summary(output.profile()) : nlohmann::json(nullptr)}};
  file << document.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// The Chrome trace; where it reached KAIROS_TRACE_MAX_BYTES, the note says where every sample is.
void write_chrome_trace(const exit_output& output, std::ostream& file) {
  const auto trace = database::write_trace(output.profile(), file);
  if (trace.samples_left_out == 0) return;
  const auto& formats = output.request.formats;
  const auto perfetto = database::perfetto_path_of(output.database_path);
  const bool perfetto_written = std::find(formats.begin(), formats.end(), "perfetto") != formats.end();
  output.written.note = fmt::format(
      "the Chrome trace {} reached KAIROS_TRACE_MAX_BYTES ({} bytes) and left out {} of {} samples (the rest is "
      "whole); {}",
      output.path, trace.limit_bytes, trace.samples_left_out, trace.samples_written + trace.samples_left_out,
      perfetto_written ? fmt::format("every sample is in the Perfetto trace {}", perfetto)
                       : fmt::format("kairos-report {} -f perfetto -o {} writes every sample to a Perfetto trace",
                                     output.database_path, perfetto));
}

// The Perfetto trace: when the samples' packets were written as the run went, only the rest is
// written now, around them.
void write_perfetto_trace(const exit_output& output, std::ostream& file) {
  const auto& samples_path = output.request.perfetto_samples_path;
  if (samples_path.empty()) {
    database::write_perfetto(output.profile(), file);
    return;
  }
  const int fd = move_above_floor(::open(samples_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd < 0) throw std::runtime_error{fmt::format("cannot read {}: {}", samples_path, std::strerror(errno))};
  __gnu_cxx::stdio_filebuf<char> buffer{fd, std::ios::in | std::ios::binary};
  std::istream samples{&buffer};
  database::write_perfetto_with_streamed_samples(output.profile(), file, samples);
  if (samples.bad()) throw std::runtime_error{fmt::format("reading {} failed", samples_path)};
}

using exit_writer = void (*)(const exit_output&, std::ostream&);
struct exit_format {
  exit_writer write = nullptr;    // nullptr: as kairos-report writes it (write_format)
  bool without_database = false;  // says something when the run wrote no database
};

// The formats kairos-run writes its own way at exit, by formats.hpp's row; every other format with
// at_exit is written as kairos-report writes it, and the one not written from a database (db) is
// the database itself.
constexpr auto exit_formats = [] {
  std::array<exit_format, database::formats.size()> table{};
  const auto row = [&](database::format_id id) -> exit_format& { return table[static_cast<std::size_t>(id)]; };
  row(database::format_id::text) = {write_text_report, true};
  row(database::format_id::json) = {write_json_report, true};
  row(database::format_id::trace) = {write_chrome_trace, false};
  row(database::format_id::perfetto) = {write_perfetto_trace, false};
  return table;
}();

}  // namespace

std::string output_file(const std::string& stem, const std::string& format) {
  const auto* row = database::find_format(format);
  return stem + (row ? std::string{row->extension} : "." + format);
}

bool stem_is_free(const std::string& stem, const std::vector<std::string>& formats) {
  struct stat status {};
  for (const auto& format : formats)
    if (lstat(output_file(stem, format).c_str(), &status) == 0) return false;
  return true;
}

problem rename_without_replacing(const std::string& from, const std::string& to) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return {};
  if (errno == EEXIST)
    return problem{
        fmt::format("{} appeared while kairos was writing it; kairos never overwrites a "
                    "file (what it wrote is not kept)",
                    to)};
  return problem{fmt::format("cannot create {}: {}", to, std::strerror(errno))};
}

written_report write_report(const report_request& request) {
  written_report written;
  const auto regions = kairos::report();
  written.database_path = request.database_path;
  // An exec snapshot: the database moves to the snapshot's name first; the other outputs read it
  // there.
  if (!request.database_path.empty() && output_file(request.stem, "db") != request.database_path) {
    if ((written.failure = rename_without_replacing(request.database_path, output_file(request.stem, "db"))))
      return written;
    written.database_path = output_file(request.stem, "db");
  }
  std::optional<database::connection> opened;
  for (const auto& name : request.formats) {
    const auto* format = database::find_format(name);
    if (format == nullptr || !format->at_exit) continue;  // the setting accepts none such
    exit_output output{request, regions, written.database_path, opened, output_file(request.stem, name), written};
    if (!format->from_database) {  // the database itself
      if (output.have_database()) written.files.push_back(output.path);
      continue;
    }
    const auto& exit = exit_formats[static_cast<std::size_t>(format->id)];
    // Only formats that say something without the database are written when there is none.
    if (!output.have_database() && !exit.without_database) continue;
    written.failure = write_output(output.path, [&](std::ostream& file) {
      if (exit.write != nullptr)
        exit.write(output, file);
      else
        database::write_format(format->id, output.profile(), file);
    });
    if (written.failure) break;
    written.files.push_back(output.path);
  }
  if (written.failure)
    written.failure =
        problem{fmt::format("{}; set KAIROS_OUTPUT_PATH (kairos-run -o) to a writable "
                            "location; the program is unaffected",
                            written.failure.text())};
  return written;
}

}  // namespace kairos::runtime
