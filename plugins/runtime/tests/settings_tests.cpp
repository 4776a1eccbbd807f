#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <unistd.h>
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>

using namespace kairos::runtime;

namespace {
struct environment_block {
  std::vector<std::string> entries;
  std::vector<const char*> pointers;
  environment_block(std::initializer_list<std::string> list) : entries{list} {
    for (auto& entry : entries) pointers.push_back(entry.c_str());
    pointers.push_back(nullptr);
  }
  const char* const* get() const { return pointers.data(); }
};

std::string temporary_file(const std::string& contents) {
  char name[] = "/tmp/kairos-settings-XXXXXX";
  const int descriptor = mkstemp(name);
  REQUIRE(descriptor >= 0);
  close(descriptor);
  std::ofstream{name} << contents;
  return name;
}
}  // namespace

TEST_CASE("every setting has a KAIROS_ variable, a category, a description and a valid default") {
  for (const auto& definition : setting_definitions()) {
    CAPTURE(definition.variable);
    CHECK(definition.variable.starts_with("KAIROS_"));
    CHECK_FALSE(definition.category.empty());
    CHECK_FALSE(definition.description.empty());
    CHECK_FALSE(check_value(definition, definition.default_value).has_value());
  }
}

TEST_CASE("the settings the issue names are registered") {
  for (auto variable :
       {"KAIROS_ENABLED", "KAIROS_VERBOSE", "KAIROS_OUTPUT_PATH", "KAIROS_OUTPUT_FORMATS",
        "KAIROS_COMPONENTS", "KAIROS_CONFIG_FILE", "KAIROS_SAMPLING_FREQ", "KAIROS_SAMPLING_DELAY",
        "KAIROS_SAMPLING_DURATION", "KAIROS_SAMPLING_CPUTIME", "KAIROS_SAMPLING_CPUTIME_FREQ",
        "KAIROS_SAMPLING_CPUTIME_DELAY", "KAIROS_SAMPLING_CPUTIME_DURATION",
        "KAIROS_SAMPLING_REALTIME", "KAIROS_SAMPLING_REALTIME_FREQ",
        "KAIROS_SAMPLING_REALTIME_DELAY", "KAIROS_SAMPLING_REALTIME_DURATION",
        "KAIROS_SAMPLING_ALLOCATOR_SIZE", "KAIROS_USE_TEMPORARY_FILES", "KAIROS_FOLLOW_CHILDREN"})
    CHECK_MESSAGE(find_setting(variable) != nullptr, variable);
}

TEST_CASE("a bad number names the variable, the value and the accepted range") {
  environment_block environment{"KAIROS_SAMPLING_FREQ=abc"};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  const auto& line = loaded.problems()[0];
  CHECK(line.starts_with("[kairos] "));
  CHECK(line.find("KAIROS_SAMPLING_FREQ") != std::string::npos);
  CHECK(line.find("\"abc\"") != std::string::npos);
  CHECK(line.find("a number in [0.001, 100000]") != std::string::npos);
  CHECK(line.find("sampling is disabled") != std::string::npos);
  CHECK_FALSE(loaded.category_usable("sampling"));
  CHECK(loaded.usable());  // regions and output do not depend on sampling
  CHECK(loaded.number(setting::sampling_freq) == 300);  // the default stays in force
}

TEST_CASE("an unknown component is rejected with the accepted names, and disables kairos") {
  environment_block environment{"KAIROS_COMPONENTS=wall_clock,wal_clock"};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].find("'wal_clock' is not one of them") != std::string::npos);
  CHECK(loaded.problems()[0].find("thread_cpu_clock") != std::string::npos);
  CHECK_FALSE(loaded.usable());
}

TEST_CASE("an unknown key in the output path is rejected with the accepted keys") {
  environment_block environment{"KAIROS_OUTPUT_PATH=out/%pid%-%bogus%"};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].find("unknown key '%bogus%'") != std::string::npos);
  CHECK(loaded.problems()[0].find("%env{NAME}%") != std::string::npos);
  CHECK_FALSE(loaded.usable());
}

TEST_CASE("an unknown KAIROS_ variable is reported") {
  environment_block environment{"KAIROS_SAMPLNG_FREQ=10", "HOME=/root"};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].find("unknown setting KAIROS_SAMPLNG_FREQ") != std::string::npos);
  CHECK(loaded.usable());  // nothing depends on it
}

TEST_CASE("sources rise in priority: default, config file, environment, command line") {
  const auto config = temporary_file(
      R"({"sampling_freq": 50, "KAIROS_SAMPLING_DELAY": 2, "components": ["wall_clock", "peak_rss"]})");
  environment_block environment{"KAIROS_CONFIG_FILE=" + config, "KAIROS_SAMPLING_DELAY=3"};
  auto loaded = settings::load(environment.get());
  CHECK(loaded.problems().empty());
  CHECK(loaded.number(setting::sampling_freq) == 50);
  CHECK(loaded.at("KAIROS_SAMPLING_FREQ").source == setting_source::config_file);
  CHECK(loaded.number(setting::sampling_delay) == 3);
  CHECK(loaded.at("KAIROS_SAMPLING_DELAY").source == setting_source::environment);
  CHECK(loaded.list(setting::components) == std::vector<std::string>{"wall_clock", "peak_rss"});
  CHECK(loaded.set("KAIROS_SAMPLING_DELAY", "4", setting_source::command_line));
  CHECK(loaded.number(setting::sampling_delay) == 4);
  CHECK(loaded.number(setting::sampling_duration) == 0);  // default
  std::remove(config.c_str());
}

TEST_CASE("an unknown key in the config file is an error naming the key and the file") {
  const auto config = temporary_file(R"({"sampling_frequency": 50})");
  environment_block environment{"KAIROS_CONFIG_FILE=" + config};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].find("unknown key \"sampling_frequency\"") != std::string::npos);
  CHECK(loaded.problems()[0].find(config) != std::string::npos);
  CHECK_FALSE(loaded.usable());
  std::remove(config.c_str());
}

TEST_CASE("a config file that is not JSON, or missing, disables kairos with one line") {
  const auto config = temporary_file("sampling_freq = 50");
  environment_block broken{"KAIROS_CONFIG_FILE=" + config};
  CHECK(settings::load(broken.get()).problems().size() == 1);
  CHECK_FALSE(settings::load(broken.get()).usable());
  environment_block missing{"KAIROS_CONFIG_FILE=/nonexistent/kairos.json"};
  CHECK(settings::load(missing.get()).problems().size() == 1);
  std::remove(config.c_str());
}

TEST_CASE("sampler settings inherit the common value when empty") {
  environment_block environment{"KAIROS_SAMPLING_FREQ=100", "KAIROS_SAMPLING_REALTIME_FREQ=20"};
  const auto loaded = settings::load(environment.get());
  CHECK(loaded.inherited_number(setting::sampling_cputime_freq, setting::sampling_freq) == 100);
  CHECK(loaded.inherited_number(setting::sampling_realtime_freq, setting::sampling_freq) == 20);
}

TEST_CASE("booleans accept the usual spellings") {
  CHECK(parse_boolean("ON") == true);
  CHECK(parse_boolean("no") == false);
  CHECK_FALSE(parse_boolean("maybe").has_value());
}

TEST_CASE("output path keys expand to this process's values") {
  path_values values;
  values.pid = "42";
  values.ppid = "7";
  values.hostname = "node1";
  values.exe = "app";
  values.launch_date = "20250101-000000";
  values.rank = "3";
  values.environment = [](std::string_view name) -> std::optional<std::string> {
    if (name == "JOB") return "job9";
    return std::nullopt;
  };
  const auto expanded = expand_path(
      "out/%launch_date%/%exe%-%pid%-%ppid%-%hostname%-r%rank%-%env{JOB}%%env{UNSET}%", values);
  CHECK(expanded.error.empty());
  CHECK(expanded.path == "out/20250101-000000/app-42-7-node1-r3-job9");
  CHECK(expand_path("%pid", values).error.find("unterminated") != std::string::npos);
  CHECK(expand_path("%env{}%", values).error.find("unknown key") != std::string::npos);
}

TEST_CASE("path values of this process are filled") {
  const auto values = path_values::of_this_process();
  CHECK(values.pid == std::to_string(getpid()));
  CHECK(values.exe == "kairos_runtime_settings_tests");
  CHECK_FALSE(values.launch_date.empty());
}

TEST_CASE("a deeply nested config file is refused with its name, before any parser sees it") {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1";
  deep += std::string(100000, '}');
  const auto path = temporary_file(deep);
  const environment_block environment{"KAIROS_CONFIG_FILE=" + path};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].find("KAIROS_CONFIG_FILE=\"" + path + "\"") != std::string::npos);
  CHECK(loaded.problems()[0].find("more than 8 deep") != std::string::npos);
  CHECK_FALSE(loaded.usable());
  std::remove(path.c_str());
}

TEST_CASE("a config file that is a directory, or too large, is refused naming KAIROS_CONFIG_FILE") {
  const environment_block directory{"KAIROS_CONFIG_FILE=/tmp"};
  const auto from_directory = settings::load(directory.get());
  REQUIRE(from_directory.problems().size() == 1);
  CHECK(from_directory.problems()[0].find("KAIROS_CONFIG_FILE=\"/tmp\"") != std::string::npos);
  CHECK(from_directory.problems()[0].find("directory") != std::string::npos);

  const auto path = temporary_file("{\"sampling_freq\": \"" + std::string(2 << 20, '1') + "\"}");
  const environment_block large{"KAIROS_CONFIG_FILE=" + path};
  const auto from_large = settings::load(large.get());
  REQUIRE(from_large.problems().size() == 1);
  CHECK(from_large.problems()[0].find("more than the 1048576 accepted") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a bad value is shown capped and with its control characters escaped") {
  const environment_block huge{"KAIROS_SAMPLING_FREQ=" + std::string(100000, 'x')};
  const auto loaded = settings::load(huge.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].size() < 400);
  CHECK(loaded.problems()[0].find("...(+99880 bytes)") != std::string::npos);

  const environment_block newline{"KAIROS_SAMPLING_FREQ=a\nb"};
  const auto escaped = settings::load(newline.get());
  REQUIRE(escaped.problems().size() == 1);
  CHECK(escaped.problems()[0].find('\n') == std::string::npos);
  CHECK(escaped.problems()[0].find("a\\x0ab") != std::string::npos);
}
