// Database ingest: samples per second through profile_writer (as a writer thread inserts them:
// batches committed every 64 Ki samples), the file size per million samples, and how long the
// derived outputs take to stream from it, and their sizes.
// Usage: bench_database [samples, default 1,000,000]
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <streambuf>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database.hpp>

namespace db = kairos::database;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point begin) {
  return std::chrono::duration<double>(clock_type::now() - begin).count();
}

int main(int argc, char** argv) {
  const long samples = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const auto path = (std::filesystem::temp_directory_path() / "kairos_bench_database.db").string();
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);

  // 1,000 distinct stacks, 8 to 24 frames deep, over 400 functions: a realistic mid-size program.
  std::mt19937_64 random{42};
  std::vector<std::vector<std::uint64_t>> stacks(1000);
  for (auto& stack : stacks) {
    stack.resize(8 + random() % 17);
    for (auto& frame : stack) frame = 0x400000 + (random() % 400) * 0x40;
  }
  auto symbolize = [](std::uint64_t address) {
    db::frame_info info;
    info.module = "/usr/bin/app";
    info.offset = address - 0x400000;
    info.function = fmt::format("function_{}", info.offset / 0x40);
    return info;
  };

  const auto begin = clock_type::now();
  {
    db::profile_writer writer{path, symbolize};
    const auto process = writer.add_process({1, 0, std::nullopt, "host", "bench", 0});
    const auto thread = writer.add_thread(process, {0, 0, 1, "main", 0});
    for (long i = 0; i < samples; ++i) {
      const auto& stack = stacks[random() % stacks.size()];
      writer.add_sample(thread, i * 1'000'000, 1'000'000, writer.add_stack(stack));
      if (i % 65536 == 65535) writer.commit();
    }
  }
  const double ingest_seconds = seconds_since(begin);
  std::uintmax_t bytes = 0;
  for (const char* suffix : {"", "-wal"})
    if (std::filesystem::exists(path + suffix)) bytes += std::filesystem::file_size(path + suffix);

  fmt::print("ingest: {} samples in {:.2f} s = {:.0f} samples/s\n", samples, ingest_seconds, samples / ingest_seconds);
  fmt::print("size: {:.1f} MB, {:.1f} MB per million samples\n", bytes / 1e6, bytes / 1e6 / (samples / 1e6));

  auto profile = db::open_profile(path);
  using writer = void (*)(db::connection&, std::ostream&);
  const std::pair<const char*, writer> outputs[] = {
      {"text", [](db::connection& p, std::ostream& o) { db::write_text(p, o); }},
      {"folded", [](db::connection& p, std::ostream& o) { db::write_folded(p, o); }},
      {"trace", [](db::connection& p, std::ostream& o) { db::write_trace(p, o); }},
      {"speedscope", [](db::connection& p, std::ostream& o) { db::write_speedscope(p, o); }},
      {"flamegraph", [](db::connection& p, std::ostream& o) { db::write_flamegraph(p, o); }},
      {"html", [](db::connection& p, std::ostream& o) { db::write_html(p, o); }}};
  for (const auto& [name, write] : outputs) {
    // Counted, not kept: the size of what a user would get, without the disk's time.
    struct counting_buffer : std::streambuf {
      std::size_t bytes = 0;
      int_type overflow(int_type c) override { return ++bytes, c; }
      std::streamsize xsputn(const char*, std::streamsize n) override { return bytes += n, n; }
    } counted;
    std::ostream sink{&counted};
    const auto output_begin = clock_type::now();
    write(profile, sink);
    fmt::print("output {}: {:.2f} s, {:.1f} KB\n", name, seconds_since(output_begin), counted.bytes / 1e3);
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);
}
