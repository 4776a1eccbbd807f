#include "preload/report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/report.hpp>
#include <kairos/report_json.hpp>

#include "preload/regions.hpp"
#include "preload/thread_registry.hpp"

namespace kairos::runtime {
namespace {

constexpr int runtime_report_version = 1;

nlohmann::json threads_json() {
  auto list = nlohmann::json::array();
  threads().for_each([&](const thread_record& record) {
    list.push_back({{"internal_id", record.internal_id},
                    {"sequent_id", record.sequent_id},
                    {"tid", record.tid},
                    {"name", record.name_text()},
                    {"kairos_owned", record.kairos_owned},
                    {"start_ns", record.start_ns},
                    {"end_ns", record.end_ns.load()},
                    {"running", record.running.load()}});
  });
  return list;
}

std::string threads_text() {
  std::string text = fmt::format("{:>10} {:>10} {:>8}  {:<16} {}\n", "SEQUENT", "INTERNAL", "TID",
                                 "NAME", "OWNER");
  std::size_t rows = 0;
  threads().for_each([&](const thread_record& record) {
    constexpr std::size_t rows_shown = 64;
    if (++rows > rows_shown) return;
    text += fmt::format("{:>10} {:>10} {:>8}  {:<16} {}\n", record.sequent_id, record.internal_id,
                        record.tid, record.name_text(), record.kairos_owned ? "kairos" : "program");
  });
  if (rows > 64) text += fmt::format("... {} more threads (all of them in the JSON output)\n", rows - 64);
  return text;
}

// Writes `contents` to `path`, creating its directory. Empty string, or what failed.
std::string write_file(const std::string& path, const std::string& contents) {
  std::error_code error;
  const auto directory = std::filesystem::path{path}.parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  std::ofstream file{path, std::ios::binary | std::ios::trunc};
  if (!file) return fmt::format("cannot write {}: {}", path, std::strerror(errno));
  file << contents;
  file.flush();
  if (!file) return fmt::format("cannot write {}: {}", path, std::strerror(errno));
  return {};
}

}  // namespace

written_report write_report(const report_request& request) {
  written_report written;
  const auto data = kairos::report();
  for (const auto& format : request.formats) {
    std::string path;
    std::string contents;
    if (format == "text") {
      path = request.stem + ".txt";
      contents = fmt::format("kairos report (version {})\ncommand: {}\npid: {}  ended by: {}\n\n",
                             runtime_report_version, request.command_line, getpid(),
                             request.end_reason);
      auto regions = kairos::format_report(data, {.per_thread = true});
      contents += regions.empty() ? "no user-API regions were recorded\n" : regions;
      if (mismatched_pops() > 0)
        contents += fmt::format("\nmismatched kairos_pop_region calls ignored: {}\n", mismatched_pops());
      contents += "\nthreads\n" + threads_text();
    } else if (format == "json") {
      path = request.stem + ".json";
      nlohmann::json document{{"kairos_report_version", runtime_report_version},
                              {"command", request.command_line},
                              {"pid", getpid()},
                              {"ppid", getppid()},
                              {"end_reason", request.end_reason},
                              {"regions_recorded", regions_recorded()},
                              {"mismatched_pops", mismatched_pops()},
                              {"threads", threads_json()},
                              {"regions", kairos::to_json(data)}};
      contents = document.dump(1) + "\n";
    } else {
      continue;
    }
    if (auto problem = write_file(path, contents); !problem.empty()) {
      written.problem = fmt::format("[kairos] {}; set KAIROS_OUTPUT_PATH (kairos-run -o) to a "
                                    "writable location; the program is unaffected",
                                    problem);
      return written;
    }
    written.files.push_back(path);
  }
  return written;
}

}  // namespace kairos::runtime
