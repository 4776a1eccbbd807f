#pragma once
// The runtime's settings: one table of data (setting_definitions()), and the values a process
// runs with, loaded in rising priority from the defaults, the JSON config file
// (KAIROS_CONFIG_FILE), the environment and kairos-run's flags. Every value is checked against its
// definition; a bad one yields one "[kairos]" line naming the variable, the value and what is
// accepted, and switches off the category (the feature) that depends on it.
#include <kairos/problem.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kairos::runtime {

enum class setting_type { boolean, integer, number, text, list, path };
std::string_view type_name(setting_type type);

enum class setting_source { default_value, config_file, environment, command_line };
std::string_view source_name(setting_source source);

// The feature a setting belongs to: a rejected value switches off its category (see
// setting_categories() for what each one stops).
enum class setting_category {
  general,
  output,
  regions,
  instrument,
  sampling,
  windows,
  gpu,
  mpi,
  process_sampling,
  annotations,
  causal,
  internal,
};

struct setting_category_definition {
  setting_category category;
  std::string_view name;           // as kairos-avail and docs/settings.md show it: "sampling"
  std::string_view when_rejected;  // ends a rejected value's line: "sampling is disabled"
  bool stops_kairos;               // a rejected value turns kairos off for the run
};

struct setting_definition {
  std::string_view name;      // config-file key: "sampling_freq"
  std::string_view variable;  // environment variable: "KAIROS_SAMPLING_FREQ"
  setting_type type;
  std::string_view default_value;  // as text; "" where unset means "inherit" or "none"
  setting_category category;
  std::string_view description;
  std::string_view choices = {};  // comma-separated accepted words (text, list); "" = any
  double minimum = 0;             // integer and number: accepted range
  double maximum = 0;
  // A check beyond the type's (a path pattern's keys, a window spec): nullopt when accepted, else
  // what is accepted and where the value departs from it.
  std::optional<std::string> (*check)(std::string_view text) = nullptr;
};

// Every setting, by name: the table's rows in order (setting_definitions()[index] is the row of
// `setting{index}`; a static_assert next to the table keeps the two in step). Code reads values
// by these names, so a misspelt setting is a compile error.
enum class setting : std::size_t {
  enabled,
  verbose,
  config_file,
  follow_children,
  output_path,
  output_formats,
  trace_max_bytes,
  flush_interval,
  source_lines,
  symbol_cache,
  components,
  instrument,
  instrument_include,
  instrument_exclude,
  instrument_file_include,
  instrument_file_exclude,
  instrument_system,
  instrument_min_duration,
  sampling_freq,
  sampling_delay,
  sampling_duration,
  sampling_cputime,
  sampling_cputime_source,
  sampling_python,
  sampling_cputime_freq,
  sampling_cputime_delay,
  sampling_cputime_duration,
  sampling_realtime,
  sampling_realtime_freq,
  sampling_realtime_delay,
  sampling_realtime_duration,
  sampling_allocator_size,
  use_temporary_files,
  trace_periods,
  trace_windows_file,
  gpu,
  gpu_stacks,
  mpi,
  process_sampling,
  process_sampling_period,
  process_sampling_metrics,
  process_sampling_cpu_root,
  openmp,
  annotations,
  causal,
  causal_scope,
  causal_select,
  causal_speedups,
  causal_include,
  causal_exclude,
  causal_binaries,
  causal_experiment,
  launch_pid,
  launch_date,
  launch_id,
  exec_generation,
};

// The table: every setting kairos knows, in display order.
std::span<const setting_definition> setting_definitions();
// One setting's row: definition_of(setting::sampling_freq).variable is "KAIROS_SAMPLING_FREQ".
const setting_definition& definition_of(setting which);
// Every category, in setting_category's order.
std::span<const setting_category_definition> setting_categories();
const setting_category_definition& definition_of(setting_category category);
// By config-file key or by environment variable (case-sensitive); nullptr when unknown.
const setting_definition* find_setting(std::string_view name_or_variable);

// What `text` would mean for `definition`: nullopt when accepted, else what is accepted
// ("a number in [0.001, 100000]", "one or more of text, json", ...).
std::optional<std::string> check_value(const setting_definition& definition, std::string_view text);
// What a setting accepts, said without a value: "a number in [1, 100000]", "one of auto, ring,
// perf, timer"; "" where its description says it (a path, free text).
std::string accepted_values(const setting_definition& definition);
// "true", "1", "yes", "on" (any case) → true; "false", "0", "no", "off" → false.
std::optional<bool> parse_boolean(std::string_view text);
// The text of a regular file of at most `max_bytes`, or why not ("it is a directory", the errno
// text, ...): the one way kairos reads a user's file.
result<std::string> read_bounded_text_file(const std::string& path, std::size_t max_bytes);
// "a, b,c" → {"a", "b", "c"}.
std::vector<std::string> split_list(std::string_view text);

// A setting's variable in this process's environment as it is now ("" when unset), and setting or
// removing it there for the processes started from here: for the launch variables kairos itself
// exports while it runs, which settings::load's snapshot does not see.
std::string environment_value(setting which);
// The same, telling unset (nullopt) from empty: an empty KAIROS_LAUNCH_ID is an answer too.
std::optional<std::string> environment_value_if_set(setting which);
void set_environment_value(setting which, const std::string& text);
void unset_environment_value(setting which);

class settings {
 public:
  struct value {
    const setting_definition* definition;
    std::string text;
    setting_source source = setting_source::default_value;
  };

  // Only the defaults.
  settings();

  // Defaults, then the config file named by KAIROS_CONFIG_FILE (in `environment`), then every
  // KAIROS_* variable of `environment` (a null-terminated "NAME=value" array, like environ).
  static settings load(const char* const* environment);

  // Sets one value from a source; a bad value is recorded as a problem and ignored.
  // `variable_or_key` is a variable or a config-file key. Returns false when rejected.
  bool set(std::string_view variable_or_key, std::string_view text, setting_source source);
  bool set(setting which, std::string_view text, setting_source source);
  // Reads a JSON config file (an object of keys or variables to values); problems are recorded.
  void apply_config_file(const std::string& path);
  void apply_environment(const char* const* environment);

  // Typed reads (the value in force; the default when the given one was bad).
  bool boolean(setting which) const;
  std::int64_t integer(setting which) const;
  double number(setting which) const;
  const std::string& text(setting which) const;
  std::vector<std::string> list(setting which) const;
  // A sampling setting of one sampler, falling back to the common one when empty:
  // inherited_number(setting::sampling_cputime_freq, setting::sampling_freq).
  double inherited_number(setting which, setting common) const;

  const std::vector<value>& values() const { return values_; }
  const value& at(setting which) const;
  // By variable or config-file key (input from users: kairos-run's flags, kairos-avail).
  const value& at(std::string_view variable) const;

  // The "[kairos] ..." lines describing every rejected value (empty when all were accepted).
  const std::vector<std::string>& problems() const { return problems_; }
  // Whether the feature a category stands for may run: false once one of its settings was
  // rejected. A rejected setting of a category that stops_kairos disables kairos as a whole.
  bool category_usable(setting_category category) const;
  bool usable() const;
  // The variable and value that made `category` unusable (the first rejected), for a later line
  // that says why the feature did nothing; nullopt while it is usable.
  std::optional<std::string> rejection_of(setting_category category) const;

 private:
  void reject(const setting_definition* definition, std::string message, std::string_view value = {});

  std::vector<value> values_;
  std::vector<std::string> problems_;
  std::vector<setting_category> unusable_categories_;
  std::vector<std::pair<setting_category, std::string>> rejections_;  // category, VARIABLE="value"
};

}  // namespace kairos::runtime
