#include <kairos/runtime/output_path.hpp>

#include <kairos/printable.hpp>
#include <kairos/runtime/launch.hpp>
#include <kairos/runtime/settings.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <limits.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

namespace kairos::runtime {

std::string_view accepted_path_keys() {
  return "%pid%, %ppid%, %hostname%, %exe%, %launch_date%, %launch_id%, %rank%, %size%, %env{NAME}%";
}

std::string format_launch_date(std::int64_t unix_seconds) {
  std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm local{};
  localtime_r(&time, &local);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y%m%d-%H%M%S", &local);
  return text.data();
}

path_values path_values::of_this_process() {
  path_values values;
  values.pid = std::to_string(getpid());
  values.ppid = std::to_string(getppid());
  std::array<char, HOST_NAME_MAX + 1> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) values.hostname = host.data();
  std::array<char, PATH_MAX> exe{};
  const auto length = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (length > 0) {
    std::string_view full{exe.data(), static_cast<std::size_t>(length)};
    values.exe = std::string{full.substr(full.rfind('/') + 1)};
  }
  const auto date = environment_value(setting::launch_date);
  values.launch_date = !date.empty() ? date : format_launch_date(std::time(nullptr));
  const auto launch = launch_of_this_process();
  // The id kairos-run exported for the launch (the one in the process row), else this process's.
  const auto id = environment_value(setting::launch_id);
  values.launch_id = !id.empty() ? id : launch.id;
  if (values.launch_id.empty()) values.launch_id = "none";
  std::replace(values.launch_id.begin(), values.launch_id.end(), '/', '_');  // one path component
  values.rank = std::to_string(launch.rank.value_or(0));
  values.size = std::to_string(launch.size.value_or(1));
  values.environment = [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string{name}.c_str());
    if (!value) return std::nullopt;
    return std::string{value};
  };
  return values;
}

namespace {

constexpr std::size_t shown_key_bytes = 120;  // of a bad key, in the error line

// Walks `pattern`, calling on_text for literal text and on_key for each %key%; stops at the first
// malformed or unknown key and returns its description.
template <class OnText, class OnKey>
problem walk(std::string_view pattern, OnText on_text, OnKey on_key) {
  static constexpr std::array<std::string_view, 8> simple_keys{"pid",         "ppid",      "hostname", "exe",
                                                               "launch_date", "launch_id", "rank",     "size"};
  std::size_t position = 0;
  while (position < pattern.size()) {
    const auto open = pattern.find('%', position);
    if (open == std::string_view::npos) {
      on_text(pattern.substr(position));
      break;
    }
    on_text(pattern.substr(position, open - position));
    const auto close = pattern.find('%', open + 1);
    if (close == std::string_view::npos)
      return problem{"unterminated key '" + printable(pattern.substr(open), shown_key_bytes) + "'"};
    const auto key = pattern.substr(open + 1, close - open - 1);
    bool known = false;
    for (auto simple : simple_keys) known = known || key == simple;
    if (!known && key.starts_with("env{") && key.ends_with("}") && key.size() > 5) known = true;
    if (!known) return problem{"unknown key '%" + printable(key, shown_key_bytes) + "%'"};
    on_key(key);
    position = close + 1;
  }
  return {};
}

}  // namespace

problem check_path_pattern(std::string_view pattern) {
  if (pattern.empty()) return problem{"an empty path"};
  return walk(
      pattern, [](std::string_view) {}, [](std::string_view) {});
}

problem check_output_directory(std::string_view stem) {
  auto blocked = [&](const std::string& why) {
    return problem{
        fmt::format("KAIROS_OUTPUT_PATH=\"{}\" cannot be written: {}", printable(stem, shown_key_bytes), why)};
  };
  std::string directory{stem.substr(0, std::min(stem.find('%'), stem.size()))};
  const auto slash = directory.rfind('/');
  directory = slash == std::string::npos ? "." : slash == 0 ? "/" : directory.substr(0, slash);
  std::string missing;  // the first directory to make, where `directory` does not exist yet
  struct stat status {};
  while (stat(directory.c_str(), &status) != 0) {
    if (errno != ENOENT) return blocked(fmt::format("cannot reach {}: {}", directory, std::strerror(errno)));
    missing = directory;
    const auto up = directory.rfind('/');
    directory = up == std::string::npos ? "." : up == 0 ? "/" : directory.substr(0, up);
  }
  if (!S_ISDIR(status.st_mode)) return blocked(fmt::format("{} is not a directory", directory));
  auto probe = (directory == "/" ? std::string{} : directory) + "/.kairos-probe-XXXXXX";
  if (mkdtemp(probe.data()) == nullptr)
    return blocked(fmt::format("cannot create {} in {}: {}", missing.empty() ? "files" : "directories", directory,
                               std::strerror(errno)));
  rmdir(probe.c_str());
  return {};
}

result<std::string> expand_path(std::string_view pattern, const path_values& values) {
  std::string path;
  auto failure = walk(
      pattern, [&](std::string_view text) { path += text; },
      [&](std::string_view key) {
        if (key == "pid")
          path += values.pid;
        else if (key == "ppid")
          path += values.ppid;
        else if (key == "hostname")
          path += values.hostname;
        else if (key == "exe")
          path += values.exe;
        else if (key == "launch_date")
          path += values.launch_date;
        else if (key == "launch_id")
          path += values.launch_id;
        else if (key == "rank")
          path += values.rank;
        else if (key == "size")
          path += values.size;
        else if (values.environment)  // env{NAME}: an unset variable expands to nothing
          path += values.environment(key.substr(4, key.size() - 5)).value_or("");
      });
  if (failure) return failure;
  return path;
}

}  // namespace kairos::runtime
