#pragma once
// KAIROS_OUTPUT_PATH keys: %pid% %ppid% %hostname% %exe% %launch_date% %launch_id% %rank% %size%
// %env{NAME}%.
// The path is a file stem: the runtime appends ".txt", ".json", ... per output format.
#include <kairos/problem.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kairos::runtime {

// What each key expands to in this process.
struct path_values {
  std::string pid;
  std::string ppid;
  std::string hostname;
  std::string exe;          // basename of the running executable
  std::string launch_date;  // shared by every process of one launch (every rank of an MPI launch)
  std::string launch_id;    // the launch's id (launch.hpp), "/" made "_"; "none" outside a launch
  std::string rank;         // MPI rank from the launcher's environment (launch.hpp), else "0"
  std::string size;         // the MPI launch's size, else "1"
  std::function<std::optional<std::string>(std::string_view)> environment;  // %env{NAME}%

  static path_values of_this_process();
};

// "%pid%, %ppid%, %hostname%, %exe%, %launch_date%, %launch_id%, %rank%, %size%, %env{NAME}%"
std::string_view accepted_path_keys();

// Empty when every key of `pattern` is known, else what is wrong with it ("unknown key '%x%'").
problem check_path_pattern(std::string_view pattern);

// The path, or the problem of check_path_pattern() when the pattern has an unknown or malformed key.
result<std::string> expand_path(std::string_view pattern, const path_values& values);

// Empty when the directory of `stem` can hold kairos's outputs (it exists and takes new files, or
// the nearest directory above it that exists takes new directories), else what stands in the way:
// 'KAIROS_OUTPUT_PATH="/proc/x/y" cannot be written: cannot create directories in /proc: No such
// file or directory'. Tried
// for real (a directory made and removed at once): permissions, read-only and special file systems
// answer as they will at the end. A `stem` whose directory holds a key (%exe%/run) is checked up
// to the last directory before the first key.
problem check_output_directory(std::string_view stem);

// "20250131-142501": the format of %launch_date%.
std::string format_launch_date(std::int64_t unix_seconds);

}  // namespace kairos::runtime
