#include <kairos/runtime/settings.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <kairos/printable.hpp>

namespace kairos::runtime {
namespace {

// A value from the user, as an error line shows it: escaped and capped (a 100,000-character
// value was echoed whole), by the one helper every output uses.
constexpr std::size_t shown_value_bytes = 120;
std::string shown(std::string_view text) { return kairos::printable(text, shown_value_bytes); }

}  // namespace

std::string_view type_name(setting_type type) {
  switch (type) {
    case setting_type::boolean:
      return "boolean";
    case setting_type::integer:
      return "integer";
    case setting_type::number:
      return "number";
    case setting_type::text:
      return "text";
    case setting_type::list:
      return "list";
    case setting_type::path:
      return "path";
  }
  return "?";
}

std::string_view source_name(setting_source source) {
  switch (source) {
    case setting_source::default_value:
      return "default";
    case setting_source::config_file:
      return "config file";
    case setting_source::environment:
      return "environment";
    case setting_source::command_line:
      return "command line";
  }
  return "?";
}

const setting_definition* find_setting(std::string_view name_or_variable) {
  for (const auto& definition : setting_definitions())
    if (definition.variable == name_or_variable || definition.name == name_or_variable) return &definition;
  return nullptr;
}

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string result{text};
  for (auto& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

template <class Number>
std::optional<Number> parse_number(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  if constexpr (std::is_floating_point_v<Number>)
    if (!std::isfinite(value)) return std::nullopt;
  return value;
}

bool is_choice(std::string_view choices, std::string_view word) {
  for (const auto& choice : split_list(choices))
    if (choice == word) return true;
  return false;
}

std::string range_text(const setting_definition& definition) {
  return fmt::format("[{}, {}]", definition.minimum, definition.maximum);
}

}  // namespace

std::optional<bool> parse_boolean(std::string_view text) {
  const auto word = lower(trim(text));
  if (word == "true" || word == "1" || word == "yes" || word == "on") return true;
  if (word == "false" || word == "0" || word == "no" || word == "off") return false;
  return std::nullopt;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  std::size_t position = 0;
  while (position <= text.size()) {
    auto comma = text.find(',', position);
    if (comma == std::string_view::npos) comma = text.size();
    if (auto item = trim(text.substr(position, comma - position)); !item.empty()) items.emplace_back(item);
    position = comma + 1;
  }
  return items;
}

std::string environment_value(setting which) { return environment_value_if_set(which).value_or(""); }

std::optional<std::string> environment_value_if_set(setting which) {
  const char* value = std::getenv(std::string{definition_of(which).variable}.c_str());
  return value ? std::optional<std::string>{value} : std::nullopt;
}

void set_environment_value(setting which, const std::string& text) {
  setenv(std::string{definition_of(which).variable}.c_str(), text.c_str(), 1);
}

void unset_environment_value(setting which) { unsetenv(std::string{definition_of(which).variable}.c_str()); }

namespace {

std::optional<std::string> check_type(const setting_definition& definition, std::string_view text) {
  switch (definition.type) {
    case setting_type::boolean:
      if (parse_boolean(text)) return std::nullopt;
      return accepted_values(definition);
    case setting_type::integer: {
      const auto value = parse_number<std::int64_t>(text);
      if (value && *value >= definition.minimum && *value <= definition.maximum) return std::nullopt;
      return accepted_values(definition);
    }
    case setting_type::number: {
      const auto value = parse_number<double>(text);
      if (value && *value >= definition.minimum && *value <= definition.maximum) return std::nullopt;
      return accepted_values(definition);
    }
    case setting_type::text:
      if (definition.choices.empty() || is_choice(definition.choices, trim(text))) return std::nullopt;
      return accepted_values(definition);
    case setting_type::list: {
      const auto items = split_list(text);
      if (items.empty()) return accepted_values(definition);
      for (const auto& item : items)
        if (!definition.choices.empty() && !is_choice(definition.choices, item))
          return fmt::format("a comma-separated list of {} ('{}' is not one of them)", definition.choices, shown(item));
      return std::nullopt;
    }
    case setting_type::path:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::string accepted_values(const setting_definition& definition) {
  switch (definition.type) {
    case setting_type::boolean:
      return "true or false (also 1/0, yes/no, on/off)";
    case setting_type::integer:
      return "an integer in " + range_text(definition);
    case setting_type::number:
      return "a number in " + range_text(definition);
    case setting_type::text:
      return definition.choices.empty() ? std::string{} : "one of " + std::string{definition.choices};
    case setting_type::list:
      return "a comma-separated list of " + std::string{definition.choices};
    case setting_type::path:
      break;
  }
  return {};
}

// The one rule for empty values: an empty (or blank) value is no value, the setting's default (or
// the lower source's value), whatever its type.
std::optional<std::string> check_value(const setting_definition& definition, std::string_view text) {
  if (trim(text).empty()) return std::nullopt;
  if (auto accepted = check_type(definition, text)) return accepted;
  return definition.check ? definition.check(trim(text)) : std::nullopt;
}

settings::settings() {
  for (const auto& definition : setting_definitions())
    values_.push_back({&definition, std::string{definition.default_value}});
}

settings settings::load(const char* const* environment) {
  settings loaded;
  std::string config_file;
  for (auto entry = environment; entry && *entry; ++entry) {
    std::string_view variable{*entry};
    if (variable.starts_with("KAIROS_CONFIG_FILE=")) config_file = variable.substr(19);
  }
  if (!config_file.empty()) loaded.apply_config_file(config_file);
  loaded.apply_environment(environment);
  return loaded;
}

const settings::value& settings::at(std::string_view variable) const {
  for (const auto& value : values_)
    if (value.definition->variable == variable || value.definition->name == variable) return value;
  throw std::out_of_range("[kairos] no setting named " + std::string{variable});
}

void settings::reject(const setting_definition* definition, std::string message, std::string_view value) {
  problems_.push_back(std::move(message));
  const auto category = definition ? definition->category : setting_category::general;
  if (definition && !rejection_of(category))
    rejections_.emplace_back(category, fmt::format("{}=\"{}\"", definition->variable, shown(value)));
  if (category_usable(category)) unusable_categories_.push_back(category);
}

bool settings::set(std::string_view variable_or_key, std::string_view text, setting_source source) {
  const auto* definition = find_setting(variable_or_key);
  if (!definition) {
    // Nothing depends on a variable kairos does not know: pointed out (a typo?), not fatal.
    problems_.push_back(
        fmt::format("[kairos] unknown setting {}=\"{}\" (from the {}); every setting "
                    "is listed by kairos-avail --settings",
                    shown(variable_or_key), shown(text), source_name(source)));
    return false;
  }
  if (trim(text).empty()) return true;  // no value: what a lower source gave stands
  if (auto accepted = check_value(*definition, text)) {
    reject(definition,
           fmt::format("[kairos] {}=\"{}\" (from the {}) is not valid: expected {}; {}", definition->variable,
                       shown(text), source_name(source), *accepted, definition_of(definition->category).when_rejected),
           text);
    return false;
  }
  for (auto& value : values_)
    if (value.definition == definition) {
      value.text = std::string{trim(text)};
      value.source = source;
    }
  return true;
}

bool settings::set(setting which, std::string_view text, setting_source source) {
  return set(definition_of(which).variable, text, source);
}

namespace {

// A config file is a flat object of settings: these bounds are far above any real one, and keep a
// hostile or broken file (a 100,000-deep object crashed the parser, before main) harmless.
constexpr std::size_t config_file_max_bytes = 1 << 20;
constexpr int config_file_max_depth = 8;

// The deepest nesting of objects and arrays in `text` (strings and escapes skipped), or
// config_file_max_depth + 1 as soon as it goes deeper.
int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      deepest = std::max(deepest, ++depth);
    else if (c == '}' || c == ']')
      --depth;
    if (deepest > config_file_max_depth) break;
  }
  return deepest;
}

}  // namespace

result<std::string> read_bounded_text_file(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return problem{std::strerror(errno)};
  struct stat status {};
  problem why_not;
  std::string content;
  if (fstat(fd, &status) != 0) {
    why_not = problem{std::strerror(errno)};
  } else if (!S_ISREG(status.st_mode)) {
    why_not = problem{S_ISDIR(status.st_mode) ? "it is a directory" : "it is not a regular file"};
  } else if (static_cast<std::size_t>(status.st_size) > max_bytes) {
    why_not = problem{fmt::format("it is {} bytes, more than the {} accepted", status.st_size, max_bytes)};
  } else {
    content.resize(static_cast<std::size_t>(status.st_size));
    std::size_t done = 0;
    while (done < content.size()) {
      const auto n = ::read(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    content.resize(done);
  }
  ::close(fd);
  if (why_not) return why_not;
  return content;
}

void settings::apply_config_file(const std::string& path) {
  const auto text = read_bounded_text_file(path, config_file_max_bytes);
  if (!text.has_value()) {
    reject(nullptr, fmt::format("[kairos] KAIROS_CONFIG_FILE=\"{}\" cannot be used: {}; expected a "
                                "readable JSON file of at most {} bytes; kairos is disabled for this run",
                                shown(path), text.failure().text(), config_file_max_bytes));
    return;
  }
  if (nesting_depth(text.value()) > config_file_max_depth) {
    reject(nullptr, fmt::format("[kairos] KAIROS_CONFIG_FILE=\"{}\" nests objects or arrays more "
                                "than {} deep; expected an object of settings; kairos is disabled "
                                "for this run",
                                path, config_file_max_depth));
    return;
  }
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text.value());
  } catch (const nlohmann::json::exception& error) {
    reject(nullptr, fmt::format("[kairos] KAIROS_CONFIG_FILE=\"{}\" is not valid JSON ({}); "
                                "expected an object of settings; kairos is disabled for this run",
                                path, error.what()));
    return;
  }
  if (!document.is_object()) {
    reject(nullptr, fmt::format("[kairos] KAIROS_CONFIG_FILE=\"{}\" holds a JSON {}; expected an "
                                "object of settings; kairos is disabled for this run",
                                path, document.type_name()));
    return;
  }
  for (const auto& [key, json_value] : document.items()) {
    std::string text;
    if (json_value.is_string())
      text = json_value.get<std::string>();
    else if (json_value.is_boolean())
      text = json_value.get<bool>() ? "true" : "false";
    else if (json_value.is_number_integer())
      text = std::to_string(json_value.get<std::int64_t>());
    else if (json_value.is_number())
      text = fmt::format("{}", json_value.get<double>());
    else if (json_value.is_array()) {
      for (const auto& item : json_value)
        text += (text.empty() ? "" : ",") + (item.is_string() ? item.get<std::string>() : item.dump());
    } else {
      text = json_value.dump();
    }
    if (!find_setting(key)) {
      reject(nullptr, fmt::format("[kairos] unknown key \"{}\" in the config file {}; accepted "
                                  "keys are the names and variables kairos-avail --settings "
                                  "lists; kairos is disabled for this run",
                                  shown(key), path));
      continue;
    }
    set(key, text, setting_source::config_file);
  }
}

void settings::apply_environment(const char* const* environment) {
  for (auto entry = environment; entry && *entry; ++entry) {
    std::string_view assignment{*entry};
    if (!assignment.starts_with("KAIROS_")) continue;
    const auto equals = assignment.find('=');
    if (equals == std::string_view::npos) continue;
    set(assignment.substr(0, equals), assignment.substr(equals + 1), setting_source::environment);
  }
}

std::optional<std::string> settings::rejection_of(setting_category category) const {
  for (const auto& [rejected, assignment] : rejections_)
    if (rejected == category) return assignment;
  return std::nullopt;
}

bool settings::category_usable(setting_category category) const {
  return std::find(unusable_categories_.begin(), unusable_categories_.end(), category) == unusable_categories_.end();
}

bool settings::usable() const {
  for (const auto& category : setting_categories())
    if (category.stops_kairos && !category_usable(category.category)) return false;
  return boolean(setting::enabled);
}

const settings::value& settings::at(setting which) const { return values_[static_cast<std::size_t>(which)]; }

bool settings::boolean(setting which) const { return parse_boolean(at(which).text).value_or(false); }

std::int64_t settings::integer(setting which) const { return parse_number<std::int64_t>(at(which).text).value_or(0); }

double settings::number(setting which) const { return parse_number<double>(at(which).text).value_or(0.0); }

const std::string& settings::text(setting which) const { return at(which).text; }

std::vector<std::string> settings::list(setting which) const { return split_list(at(which).text); }

double settings::inherited_number(setting which, setting common) const {
  if (trim(at(which).text).empty()) return number(common);
  return number(which);
}

}  // namespace kairos::runtime
