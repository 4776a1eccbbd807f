#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <kairos/runtime/output_path.hpp>
#include <kairos/runtime/settings.hpp>
#include <kairos/runtime/time_windows.hpp>

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
    CHECK_FALSE(definition_of(definition.category).name.empty());
    CHECK_FALSE(definition.description.empty());
    CHECK_FALSE(check_value(definition, definition.default_value).has_value());
  }
}

TEST_CASE("the settings the issue names are registered") {
  for (auto variable : {"KAIROS_ENABLED",
                        "KAIROS_VERBOSE",
                        "KAIROS_OUTPUT_PATH",
                        "KAIROS_OUTPUT_FORMATS",
                        "KAIROS_COMPONENTS",
                        "KAIROS_CONFIG_FILE",
                        "KAIROS_SAMPLING_FREQ",
                        "KAIROS_SAMPLING_DELAY",
                        "KAIROS_SAMPLING_DURATION",
                        "KAIROS_SAMPLING_CPUTIME",
                        "KAIROS_SAMPLING_CPUTIME_FREQ",
                        "KAIROS_SAMPLING_CPUTIME_DELAY",
                        "KAIROS_SAMPLING_CPUTIME_DURATION",
                        "KAIROS_SAMPLING_REALTIME",
                        "KAIROS_SAMPLING_REALTIME_FREQ",
                        "KAIROS_SAMPLING_REALTIME_DELAY",
                        "KAIROS_SAMPLING_REALTIME_DURATION",
                        "KAIROS_SAMPLING_ALLOCATOR_SIZE",
                        "KAIROS_USE_TEMPORARY_FILES",
                        "KAIROS_FOLLOW_CHILDREN"})
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
  CHECK_FALSE(loaded.category_usable(setting_category::sampling));
  CHECK(loaded.usable());                               // regions and output do not depend on sampling
  CHECK(loaded.number(setting::sampling_freq) == 300);  // the default stays in force
}

TEST_CASE("a bad instrumentation filter says it turns off instrumented functions, and only them") {
  environment_block environment{"KAIROS_INSTRUMENT_INCLUDE=fib("};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  const auto& line = loaded.problems()[0];
  CHECK(line.find("POSIX extended regular expression") != std::string::npos);
  CHECK(line.ends_with("; instrumented functions are not recorded"));
  CHECK_FALSE(loaded.category_usable(setting_category::instrument));
  CHECK(loaded.usable());  // kairos runs on: sampling and the user API's regions are unaffected
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
  const auto config =
      temporary_file(R"({"sampling_freq": 50, "KAIROS_SAMPLING_DELAY": 2, "components": ["wall_clock", "peak_rss"]})");
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

TEST_CASE("an empty value of any setting is no value: the default, or what a lower source gave") {
  const auto config = temporary_file(R"({"sampling_freq": 50})");
  environment_block environment{"KAIROS_CONFIG_FILE=" + config, "KAIROS_SAMPLING_FREQ=", "KAIROS_SAMPLING_DELAY= ",
                                "KAIROS_OUTPUT_PATH=",          "KAIROS_ENABLED=",       "KAIROS_OUTPUT_FORMATS=",
                                "KAIROS_SAMPLING_CPUTIME_FREQ="};
  const auto loaded = settings::load(environment.get());
  CHECK(loaded.problems().empty());
  CHECK(loaded.usable());
  CHECK(loaded.number(setting::sampling_freq) == 50);  // the config file's
  CHECK(loaded.at(setting::sampling_freq).source == setting_source::config_file);
  CHECK(loaded.number(setting::sampling_delay) == 0.5);
  CHECK(loaded.at(setting::sampling_delay).source == setting_source::default_value);
  CHECK(loaded.text(setting::output_path) == "kairos-output/%exe%-%pid%");
  CHECK(loaded.boolean(setting::enabled));
  CHECK(loaded.list(setting::output_formats) == std::vector<std::string>{"db", "text", "trace"});
  CHECK(loaded.inherited_number(setting::sampling_cputime_freq, setting::sampling_freq) == 50);
  for (const auto& definition : setting_definitions()) CHECK_FALSE(check_value(definition, " ").has_value());
  std::remove(config.c_str());
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
  values.size = "4";
  values.environment = [](std::string_view name) -> std::optional<std::string> {
    if (name == "JOB") return "job9";
    return std::nullopt;
  };
  const auto expanded =
      expand_path("out/%launch_date%/%exe%-%pid%-%ppid%-%hostname%-r%rank%of%size%-%env{JOB}%%env{UNSET}%", values);
  REQUIRE(expanded.has_value());
  CHECK(expanded.value() == "out/20250101-000000/app-42-7-node1-r3of4-job9");
  CHECK(expand_path("%pid", values).failure().text().find("unterminated") != std::string::npos);
  CHECK(expand_path("%env{}%", values).failure().text().find("unknown key") != std::string::npos);
}

TEST_CASE("what a setting accepts is said without a value, as a refused value's line says it") {
  CHECK(accepted_values(definition_of(setting::sampling_freq)) == "a number in [0.001, 100000]");
  CHECK(accepted_values(definition_of(setting::sampling_cputime)) == "true or false (also 1/0, yes/no, on/off)");
  CHECK(accepted_values(definition_of(setting::sampling_cputime_source)) == "one of auto,ring,perf,timer");
  CHECK(accepted_values(definition_of(setting::output_path)).empty());  // its description says it
  environment_block environment{"KAIROS_SAMPLING_CPUTIME_SOURCE=sometimes"};
  const auto loaded = settings::load(environment.get());
  REQUIRE(loaded.problems().size() == 1);
  CHECK(loaded.problems()[0].find("expected one of auto,ring,perf,timer;") != std::string::npos);
}

TEST_CASE("an output directory that cannot be made is named with what stands in the way") {
  char made[] = "/tmp/kairos-output-check-XXXXXX";
  REQUIRE(mkdtemp(made) != nullptr);
  const std::string directory = made;
  CHECK_FALSE(check_output_directory(directory + "/out/%pid%/deeper/x"));  // made at the end
  CHECK_FALSE(check_output_directory(directory + "/x"));
  CHECK(check_output_directory("/proc/kairos-x/y").text() ==
        "KAIROS_OUTPUT_PATH=\"/proc/kairos-x/y\" cannot be written: cannot create directories in /proc: No such "
        "file or directory");
  std::ofstream{directory + "/file"} << "";
  CHECK(check_output_directory(directory + "/file/out").text().ends_with(directory + "/file is not a directory"));
  CHECK(check_output_directory(directory + "/file/%exe%/out").text().ends_with("is not a directory"));
  std::remove((directory + "/file").c_str());
  CHECK(rmdir(made) == 0);  // no probe left behind
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

// --- time windows (docs/windows.md) ------------------------------------------------------------

TEST_CASE("period specs: clock first or last, defaults, units, several in sequence") {
  auto parsed = parse_periods("realtime:10:1:5 process_cputime:10:2:20, 10:250ms  instructions:100M:10M:0");
  REQUIRE(parsed.has_value());
  const auto& specs = parsed.value();
  REQUIRE(specs.size() == 4);
  CHECK(specs[0].clock == window_clock::realtime);
  CHECK(specs[0].delay == 10'000'000'000);
  CHECK(specs[0].duration == 1'000'000'000);
  CHECK(specs[0].repeat == 5);
  CHECK(specs[1].clock == window_clock::process_cputime);
  CHECK(specs[1].repeat == 20);
  CHECK(specs[2].clock == window_clock::realtime);  // the default clock
  CHECK(specs[2].duration == 250'000'000);
  CHECK(specs[2].repeat == 1);  // the default repeat
  CHECK(specs[3].clock == window_clock::instructions);
  CHECK(specs[3].delay == 100'000'000);
  CHECK(specs[3].repeat == 0);
  CHECK(specs[3].text == "instructions:100M:10M:0");

  auto last = parse_periods("10:1:3:thread_cputime 1.5:50us:monotonic 0:2.25ms");
  REQUIRE(last.has_value());
  CHECK(last.value()[0].clock == window_clock::thread_cputime);
  CHECK(last.value()[0].repeat == 3);
  CHECK(last.value()[1].clock == window_clock::monotonic);
  CHECK(last.value()[1].delay == 1'500'000'000);
  CHECK(last.value()[1].duration == 50'000);
  CHECK(last.value()[2].duration == 2'250'000);
  CHECK(parse_periods("").value().empty());
  CHECK(parse_periods(" , ").value().empty());
}

TEST_CASE("a malformed period spec is named with its position and what is accepted") {
  const auto error_of = [](const char* text) {
    auto parsed = parse_periods(text);
    REQUIRE_FALSE(parsed.has_value());
    return parsed.failure().text();
  };
  CHECK(error_of("realtime:10:x:5") ==
        "spec 1 (\"realtime:10:x:5\"), character 13: the duration: \"x\" is not "
        "a number of seconds with an optional unit s, ms, us or ns (10, 2.5, 250ms)");
  CHECK(error_of("realtime:1:1 walltime:1:1").find("character 14: \"walltime\" is not a clock; clocks: realtime,") !=
        std::string::npos);
  CHECK(error_of("10M:1:realtime").find("\"10M\" counts instructions, but the realtime clock takes") !=
        std::string::npos);
  CHECK(error_of("instructions:1ms:1M").find("is a time, but the instructions clock takes a count") !=
        std::string::npos);
  CHECK(error_of("10m:1").find("\"10m\" is ambiguous") != std::string::npos);
  CHECK(error_of("1:0").find("the duration is 0") != std::string::npos);
  CHECK(error_of("1:1:-2").find("the repeat count \"-2\" is not an integer") != std::string::npos);
  CHECK(error_of("1").find("has 1 number; a spec is delay:duration") != std::string::npos);
  CHECK(error_of("1:2:3:4:5").find("has 5 numbers") != std::string::npos);
  CHECK(error_of("1:1:0 2:2").find("spec 2 (\"2:2\", character 7) follows \"1:1:0\", which repeats until") !=
        std::string::npos);
  CHECK(error_of("instructions:1.5:1M").find("finer than 1 instruction") != std::string::npos);
  CHECK(error_of("99999999999:1").find("too large") != std::string::npos);
  CHECK(error_of("1..5:1").find("is not a number") != std::string::npos);
}

TEST_CASE("KAIROS_TRACE_PERIODS is checked when loaded: a bad one disables kairos, naming the spec") {
  environment_block environment{"KAIROS_TRACE_PERIODS=realtime:1:1 process_cputime:1:zz"};
  const auto values = settings::load(environment.get());
  REQUIRE(values.problems().size() == 1);
  CHECK(values.problems()[0].find("[kairos] KAIROS_TRACE_PERIODS=\"realtime:1:1 process_cputime:1:zz\" (from the "
                                  "environment) is not valid: expected specs clock:delay:duration[:repeat]") == 0);
  CHECK(values.problems()[0].find("spec 2 (\"process_cputime:1:zz\"), character 32: the duration") !=
        std::string::npos);
  CHECK_FALSE(values.usable());
}

TEST_CASE("a windows file takes comments, a header and units, and names out-of-order windows by line") {
  auto parsed = parse_windows_file(
      "# phases\nclock,start,length\n realtime , 1 , 0.5 \n\ninstructions,100M,10M # B\n"
      "realtime,2s,250ms\n",
      "w.csv");
  REQUIRE(parsed.has_value());
  REQUIRE(parsed.value().size() == 3);
  CHECK(parsed.value()[0].start == 1'000'000'000);
  CHECK(parsed.value()[0].length == 500'000'000);
  CHECK(parsed.value()[1].clock == window_clock::instructions);
  CHECK(parsed.value()[1].length == 10'000'000);
  CHECK(parsed.value()[2].text == "w.csv:6: realtime,2s,250ms");

  auto overlap = parse_windows_file("realtime,2,1\nmonotonic,0,1\nrealtime,2.5,1\n", "w.csv");
  REQUIRE_FALSE(overlap.has_value());
  CHECK(overlap.failure().text().find(
            "w.csv:3, column 10: this realtime window starts before the one of line 1 ends") == 0);
  auto fields = parse_windows_file("realtime,1\n", "w.csv");
  REQUIRE_FALSE(fields.has_value());
  CHECK(fields.failure().text().find(
            "w.csv:1, column 1: \"realtime,1\" has 2 fields; each line is clock,start,length") == 0);
  auto missing = load_windows_file("/nonexistent/windows.csv");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.failure().text().find("/nonexistent/windows.csv cannot be read: No such file or directory") == 0);
}

TEST_CASE("the window plan runs the specs one after another, then the file's windows") {
  auto periods = parse_periods("realtime:1:1:2 monotonic:0:1");
  auto fixed = parse_windows_file("instructions,5M,1M\n", "w.csv");
  window_plan plan{std::move(periods).value(), std::move(fixed).value()};
  CHECK(plan.uses(window_clock::instructions));
  CHECK_FALSE(plan.uses(window_clock::thread_cputime));
  std::vector<std::pair<window_clock, std::int64_t>> seen;
  while (auto window = plan.next()) {
    CHECK(window->ordinal == static_cast<std::int64_t>(seen.size()) + 1);
    seen.emplace_back(window->clock, window->cycle);
  }
  CHECK(seen == std::vector<std::pair<window_clock, std::int64_t>>{{window_clock::realtime, 1},
                                                                   {window_clock::realtime, 2},
                                                                   {window_clock::monotonic, 1},
                                                                   {window_clock::instructions, 1}});
  auto forever = window_plan{parse_periods("1:1:0").value(), {}};
  for (int i = 0; i < 1000; ++i) REQUIRE(forever.next());
  auto dropped =
      window_plan{parse_periods("instructions:1M:1M:0").value(), parse_windows_file("realtime,1,1", "w").value()};
  dropped.drop(window_clock::instructions);
  CHECK(dropped.next()->clock == window_clock::realtime);
  CHECK_FALSE(dropped.next());
}
