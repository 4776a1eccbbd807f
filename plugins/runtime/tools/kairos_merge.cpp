// kairos-merge -o ALL.db INPUT... [--keep-going]: profile databases of many processes (files,
// directories holding them, globs) copied into one (docs/merge.md), one input at a time, with a
// progress bar on a terminal and plain lines otherwise. An input that cannot be merged is named and
// skipped; the exit status is then 1 unless --keep-going.
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <kairos/plugins/database/merge.hpp>

namespace {

namespace fs = std::filesystem;

constexpr const char* accepted =
    "kairos-merge takes profile databases (.db files), directories holding them, or globs such as 'ranks/*.db'";

// A file as given; a directory's .db files, sorted; a glob's matches, sorted. Empty with `problem`
// set when the argument is none of these.
std::vector<std::string> expand(const std::string& argument, std::string& problem) {
  std::error_code error;
  if (fs::is_directory(argument, error)) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(argument, error))
      if (entry.path().extension() == ".db" && entry.is_regular_file(error)) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) problem = fmt::format("[kairos] input '{}' is a directory with no .db files; {}", argument, accepted);
    return files;
  }
  if (fs::exists(argument, error)) return {argument};
  if (argument.find_first_of("*?[") != std::string::npos) {
    glob_t matches{};
    std::vector<std::string> files;
    if (::glob(argument.c_str(), 0, nullptr, &matches) == 0)
      files.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
    ::globfree(&matches);
    if (files.empty()) problem = fmt::format("[kairos] input '{}' is a glob that matches no file; {}", argument, accepted);
    return files;
  }
  problem = fmt::format("[kairos] input '{}' does not exist; {}", argument, accepted);
  return {};
}

// A bar redrawn in place on a terminal (at most 10 times a second), a line every 2 s otherwise.
class progress {
 public:
  progress(std::size_t inputs, bool terminal) : inputs_{inputs}, terminal_{terminal} {}

  void update(std::size_t done, std::int64_t samples, bool last = false) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - shown_ < (terminal_ ? std::chrono::milliseconds{100} : std::chrono::milliseconds{2000})) return;
    shown_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const auto status = fmt::format("{}/{} inputs, {:.1f} M samples, {:.2f} M samples/s", done, inputs_,
                                    samples * 1e-6, seconds > 0 ? samples * 1e-6 / seconds : 0.0);
    if (terminal_) {
      constexpr std::size_t width = 30;
      const std::size_t filled = inputs_ == 0 ? width : width * done / inputs_;
      std::cerr << fmt::format("\r[kairos] merging [{}{}] {}\x1b[K", std::string(filled, '#'),
                               std::string(width - filled, '.'), status);
      if (last) std::cerr << '\n';
    } else {
      std::cerr << "[kairos] merged " << status << '\n';
    }
    std::cerr.flush();
  }

  // A problem on a line of its own, the bar drawn again below it.
  void problem(const std::string& message) {
    if (terminal_) std::cerr << "\r\x1b[K";
    std::cerr << message << '\n';
    shown_ = {};
  }

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::size_t inputs_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), shown_{};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kairos-merge: profile databases of many processes or ranks joined into one (docs/merge.md)"};
  std::string output;
  std::vector<std::string> arguments;
  bool keep_going = false;
  app.add_option("-o,--output", output, "the merged database to create (it must not exist)")->required();
  app.add_option("inputs", arguments, "profile databases (.db), directories holding them, or globs ('ranks/*.db'); "
                                      "merged databases too")
      ->required();
  app.add_flag("--keep-going", keep_going, "exit 0 when inputs were skipped (corrupt, another schema version, "
                                           "merged already): they are still named");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }

  std::vector<std::string> inputs;
  for (const auto& argument : arguments) {
    std::string problem;
    auto files = expand(argument, problem);
    if (!problem.empty()) {
      std::cerr << problem << '\n';
      return 2;
    }
    inputs.insert(inputs.end(), files.begin(), files.end());
  }

  std::unique_ptr<kairos::database::merger> merger;
  try {
    merger = std::make_unique<kairos::database::merger>(output);
  } catch (const std::exception& problem) {
    std::cerr << problem.what() << "; give -o a new path\n";
    return 2;
  }
  progress shown{inputs.size(), ::isatty(STDERR_FILENO) == 1};
  std::size_t merged = 0, skipped = 0;
  for (std::size_t index = 0; index < inputs.size(); ++index) {
    try {
      merger->add(inputs[index]);
      ++merged;
    } catch (const std::exception& problem) {
      ++skipped;
      shown.problem(fmt::format("{} (skipped)", problem.what()));
    }
    shown.update(index + 1, merger->samples(), index + 1 == inputs.size());
  }
  try {
    merger->finish();
  } catch (const std::exception& problem) {
    std::cerr << problem.what() << '\n';
    return 1;
  }
  std::cerr << fmt::format("[kairos] {}: {} of {} inputs merged ({} processes, {} samples) in {:.1f} s{}\n", output,
                           merged, inputs.size(), merger->processes(), merger->samples(), shown.seconds(),
                           skipped == 0 ? "" : fmt::format("; {} skipped, named above", skipped));
  if (merged == 0) return 1;
  return skipped == 0 || keep_going ? 0 : 1;
}
