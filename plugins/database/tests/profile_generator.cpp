// kairos_profile_generator DIR COUNT SAMPLES [DISTINCT] [LAUNCH_ID]: COUNT rank databases
// (DIR/rank-00000.db ...) of SAMPLES CPU-time samples each, for kairos-merge's tests and benchmark.
// DISTINCT profiles (default 8) are written by profile_writer, each from its own seed: 4 threads, a
// program of 200 functions, stacks 3 to 24 deep drawn from 400 per profile (the heaviest most
// often), a region and a counter every 100 samples. The ranks are copies of them that differ in
// pid, rank, host (64 ranks a node), start time and launch id (the process row), so
// that making 1,000 inputs costs 1,000 file copies rather than 1,000 profiles' inserts.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database.hpp>

namespace db = kairos::database;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t functions = 200;
constexpr int stacks_per_profile = 400;
constexpr int threads = 4;

// Function k lives at 0x1000 + 0x100 k of /usr/bin/app.
db::frame_info symbols(std::uint64_t address) {
  db::frame_info info;
  info.address = address;
  info.module = "/usr/bin/app";
  info.offset = address - 0x1000;
  info.function = fmt::format("function_{}", (address - 0x1000) / 0x100);
  info.file = "app.cpp";
  info.line = static_cast<std::uint32_t>((address - 0x1000) / 0x100);
  return info;
}

void write_profile(const std::string& path, std::int64_t samples, unsigned seed) {
  std::mt19937_64 random{seed};
  db::profile_writer writer{path, symbols};
  writer.set_metadata("command", "app --generated");
  writer.set_metadata("seed", std::to_string(seed));
  const auto process = writer.add_process({1, 0, 0, "node-0", "app --generated", 1'000'000});
  std::vector<std::int64_t> thread_rows;
  for (int thread = 0; thread < threads; ++thread)
    thread_rows.push_back(
        writer.add_thread(process, {thread, thread, 1 + thread, fmt::format("worker-{}", thread), 1'000'000}));
  // Every stack starts at main (function 0); the callees are drawn from the program's functions.
  std::vector<std::int64_t> stacks;
  std::uniform_int_distribution<std::uint64_t> function{1, functions - 1};
  std::uniform_int_distribution<int> depth{3, 24};
  for (int stack = 0; stack < stacks_per_profile; ++stack) {
    std::vector<std::uint64_t> addresses(static_cast<std::size_t>(depth(random)));
    for (auto& address : addresses) address = 0x1000 + 0x100 * function(random);
    addresses.back() = 0x1000;  // leaf first: main is last
    stacks.push_back(writer.add_stack(addresses));
  }
  std::geometric_distribution<int> heaviest_first{0.02};
  std::uniform_int_distribution<std::int64_t> weight{500'000, 1'500'000};
  for (std::int64_t sample = 0; sample < samples; ++sample) {
    const auto thread = thread_rows[static_cast<std::size_t>(sample % threads)];
    const auto time_ns = 1'000'000 + sample * 250'000;
    writer.add_sample(thread, time_ns, weight(random),
                      stacks[static_cast<std::size_t>(heaviest_first(random)) % stacks.size()]);
    if (sample % 100 == 0) {
      writer.add_region(thread, fmt::format("phase_{}", sample / 100 % 10), time_ns, time_ns + 20'000'000, 0);
      writer.add_counter(thread, time_ns, "thread_cpu_time_ns", static_cast<double>(time_ns));
    }
  }
  writer.commit();
}

std::int64_t number(const char* text, const char* what) {
  std::int64_t value = 0;
  const std::string_view digits{text};
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc{} || end != digits.data() + digits.size() || value < 1)
    throw std::invalid_argument(fmt::format("[kairos] {} must be a whole number >= 1, not '{}'", what, text));
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: %s DIR COUNT SAMPLES [DISTINCT] [LAUNCH_ID]\n", argv[0]);
    return 2;
  }
  try {
    const fs::path directory{argv[1]};
    const auto count = number(argv[2], "COUNT");
    const auto samples = number(argv[3], "SAMPLES");
    const auto distinct = std::min(count, argc > 4 ? number(argv[4], "DISTINCT") : 8);
    const std::string launch_id = argc > 5 ? argv[5] : "";
    fs::create_directories(directory);
    std::vector<fs::path> templates;
    for (std::int64_t seed = 0; seed < distinct; ++seed) {
      templates.push_back(directory / fmt::format("template-{}.kairos-template", seed));
      fs::remove(templates.back());
      write_profile(templates.back().string(), samples, static_cast<unsigned>(seed + 1));
    }
    for (std::int64_t rank = 0; rank < count; ++rank) {
      const auto path = directory / fmt::format("rank-{:05}.db", rank);
      fs::copy_file(templates[static_cast<std::size_t>(rank % distinct)], path, fs::copy_options::overwrite_existing);
      db::connection copy{path.string(), db::connection::mode::create};
      copy.execute("PRAGMA synchronous = OFF");  // a benchmark's input: no sync per file
      auto update = copy.prepare("UPDATE process SET pid = ?, rank = ?, start_ns = ?, launch_id = NULLIF(?, '')");
      update.bind(1, 10'000 + rank).bind(2, rank).bind(3, 1'000'000 + rank).bind(4, std::string_view{launch_id}).run();
      // The host: interned if new, its row then pointed at.
      copy.execute(
          fmt::format("INSERT OR IGNORE INTO string (value) VALUES ('node-{0}');"
                      "UPDATE process SET hostname = (SELECT id FROM string WHERE value = 'node-{0}');"
                      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('pid', '{1}');",
                      rank / 64, 10'000 + rank));
    }
    for (const auto& path : templates) fs::remove(path);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
