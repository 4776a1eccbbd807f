#include "preload/report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/report.hpp>
#include <kairos/report_json.hpp>
#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/schema.hpp>

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

std::string write_problem(const std::string& path) {
  return fmt::format("cannot write {}: {}", path, std::strerror(errno));
}

// Opens `path` for writing, creating its directory.
std::ofstream open_output(const std::string& path) {
  std::error_code error;
  const auto directory = std::filesystem::path{path}.parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  return std::ofstream{path, std::ios::binary | std::ios::trunc};
}

// The profile summary as JSON (null without a database).
nlohmann::json profile_summary(const std::string& database_path) {
  if (database_path.empty()) return nullptr;
  auto profile = database::open_profile(database_path);
  std::ostringstream text;
  database::write_summary_json(profile, text);
  return nlohmann::json::parse(text.str());
}

}  // namespace

std::string output_file(const std::string& stem, const std::string& format) {
  if (format == "text") return stem + ".txt";
  if (format == "trace") return stem + ".trace.json";
  return stem + "." + format;
}

written_report write_report(const report_request& request) {
  written_report written;
  const auto data = kairos::report();
  const bool have_database = !request.database_path.empty();
  for (const auto& format : request.formats) {
    const auto path = output_file(request.stem, format);
    if (format == "db") {
      if (!have_database) continue;
      if (path != request.database_path) {  // an exec snapshot: the database was renamed
        std::error_code error;
        std::filesystem::rename(request.database_path, path, error);
      }
      written.files.push_back(path);
      continue;
    }
    if (!have_database && (format == "trace" || format == "folded")) continue;
    std::ofstream file = open_output(path);
    if (!file) {
      written.problem = write_problem(path);
      break;
    }
    if (format == "text") {
      file << fmt::format("kairos report (version {})\ncommand: {}\npid: {}  ended by: {}\n\n",
                          runtime_report_version, request.command_line, getpid(), request.end_reason);
      if (have_database) {
        auto profile = database::open_profile(request.database_path);
        database::write_text(profile, file);
        file << "\n";
      }
      auto regions = kairos::format_report(data, {.per_thread = true});
      file << (regions.empty() ? "no user-API regions were recorded\n" : regions);
      if (mismatched_pops() > 0)
        file << fmt::format("\nmismatched kairos_pop_region calls ignored: {}\n", mismatched_pops());
      file << "\nthreads\n" << threads_text();
    } else if (format == "trace") {
      auto profile = database::open_profile(request.database_path);
      database::write_trace(profile, file);
    } else if (format == "folded") {
      auto profile = database::open_profile(request.database_path);
      database::write_folded(profile, file);
    } else if (format == "json") {
      nlohmann::json document{{"kairos_report_version", runtime_report_version},
                              {"command", request.command_line},
                              {"pid", getpid()},
                              {"ppid", getppid()},
                              {"end_reason", request.end_reason},
                              {"regions_recorded", regions_recorded()},
                              {"mismatched_pops", mismatched_pops()},
                              {"threads", threads_json()},
                              {"regions", kairos::to_json(data)},
                              {"profile", profile_summary(request.database_path)}};
      file << document.dump(1) << "\n";
    } else {
      continue;
    }
    file.flush();
    if (!file) {
      written.problem = write_problem(path);
      break;
    }
    written.files.push_back(path);
  }
  if (!written.problem.empty())
    written.problem = fmt::format("[kairos] {}; set KAIROS_OUTPUT_PATH (kairos-run -o) to a "
                                  "writable location; the program is unaffected",
                                  written.problem);
  return written;
}

}  // namespace kairos::runtime
