// The profile database against the run's length: for each sample count, ingest through
// profile_writer (as a writer thread inserts them: a commit every 64 Ki samples), then what the
// runtime does after the program's last instruction: the writer's finish (window counts, the last
// commit) and the outputs written from the database. The writer streams the Perfetto trace's
// sample packets to a file beside the database as it commits, as the runtime does when perfetto is
// among its formats, so the ingest rate includes encoding them; at exit the Perfetto trace is
// written around them (the runtime's way, "perfetto") and, for comparison, wholly from the
// database (kairos-report's way, "perfetto from the database", not in the totals). Printed per
// count: ingest rate, file size, each output's time and size, the exit time with the default
// formats (formats.hpp's default_exit_formats) and with every format, and the peak memory the outputs added (VmHWM,
// reset before them); then the HTML timeline's CPU use drawn from the time buckets and from the
// samples, side by side.
// Usage: bench_database [counts, comma-separated, default 10000,100000,1000000] [unstreamed]
// ("unstreamed": no packets streamed, as a run without the perfetto format; the Perfetto trace
// in the exit figures is then the one from the database).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <kairos/plugins/database.hpp>

namespace db = kairos::database;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point begin) {
  return std::chrono::duration<double>(clock_type::now() - begin).count();
}

// The process's resident peak, in MiB, since the last reset_peak().
double peak_mib() {
  std::ifstream status{"/proc/self/status"};
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::atof(line.c_str() + 6) / 1024.0;
  return 0;
}
void reset_peak() { std::ofstream{"/proc/self/clear_refs"} << "5"; }

std::vector<long> counts_from(const char* text) {
  std::vector<long> counts;
  std::stringstream list{text};
  for (std::string item; std::getline(list, item, ',');) counts.push_back(std::atol(item.c_str()));
  return counts;
}

// Counted, not kept: the size of what a user would get, without the disk's time.
struct counting_buffer : std::streambuf {
  std::size_t bytes = 0;
  int_type overflow(int_type c) override { return ++bytes, c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return bytes += n, n; }
};

std::int64_t earliest_sample_ns(db::connection& profile) {
  auto query = profile.prepare("SELECT COALESCE(MIN(first_ns), 0) FROM stack_total");
  query.step();
  return query.integer(0);
}

void run(long samples, bool streamed) {
  const auto path = (std::filesystem::temp_directory_path() / "kairos_bench_database.db").string();
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);
  const auto samples_path = db::perfetto_samples_path_of(path);
  std::filesystem::remove(samples_path);

  // 1,000 distinct stacks, 8 to 24 frames deep, over 400 functions, on 8 threads: a realistic
  // mid-size program.
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
  double finish_seconds = 0;
  {
    db::profile_writer writer{path, symbolize};
    const int samples_file =
        streamed ? ::open(samples_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    if (streamed)
      writer.stream_perfetto_samples([samples_file](std::string_view packets) {
        return ::write(samples_file, packets.data(), packets.size()) == static_cast<ssize_t>(packets.size());
      });
    const auto process = writer.add_process({1, 0, std::nullopt, "host", "bench", 0});
    std::int64_t threads[8];
    for (int t = 0; t < 8; ++t) threads[t] = writer.add_thread(process, {t, t, 100 + t, "worker", 0});
    for (long i = 0; i < samples; ++i) {
      const auto& stack = stacks[random() % stacks.size()];
      writer.add_sample(threads[i % 8], i * 125'000, 1'000'000, writer.add_stack(stack));
      if (i % 65536 == 65535) writer.commit();
    }
    const auto finish = clock_type::now();
    writer.count_window_rows();
    writer.commit();
    finish_seconds = seconds_since(finish);
    if (streamed) {
      ::close(samples_file);
      if (!writer.perfetto_samples_whole()) fmt::print("the sample packets' file is not whole\n");
    }
  }
  const double ingest_seconds = seconds_since(begin) - finish_seconds;
  std::uintmax_t bytes = 0;
  for (const char* suffix : {"", "-wal"})
    if (std::filesystem::exists(path + suffix)) bytes += std::filesystem::file_size(path + suffix);

  fmt::print("{} samples: ingest {:.0f} samples/s, {:.1f} MB ({:.1f} MB a million samples)\n", samples,
             samples / ingest_seconds, bytes / 1e6, bytes / 1e6 / (samples / 1e6));

  reset_peak();
  const double peak_before = peak_mib();
  auto profile = db::open_profile(path);
  using db::format_id;
  double default_seconds = finish_seconds, all_seconds = finish_seconds;
  std::string line;
  // Every format written at exit, from formats.hpp's table; Perfetto's below, both ways.
  for (const auto& row : db::formats) {
    if (!row.at_exit || !row.from_database || row.id == format_id::perfetto) continue;
    counting_buffer counted;
    std::ostream sink{&counted};
    const auto output_begin = clock_type::now();
    db::write_format(row.id, profile, sink);
    const double seconds = seconds_since(output_begin);
    all_seconds += seconds;
    if (std::ranges::find(db::default_exit_formats, row.id) != db::default_exit_formats.end())
      default_seconds += seconds;
    line += fmt::format("  {} {:.3f} s {:.1f} MB", row.name, seconds, counted.bytes / 1e6);
  }
  if (streamed) {
    counting_buffer counted;
    std::ostream sink{&counted};
    const auto output_begin = clock_type::now();
    std::ifstream packets{samples_path, std::ios::binary};
    db::write_perfetto_with_streamed_samples(profile, sink, packets);
    const double seconds = seconds_since(output_begin);
    all_seconds += seconds;
    line += fmt::format("  perfetto {:.3f} s {:.1f} MB ({:.1f} MB streamed)", seconds, counted.bytes / 1e6,
                        std::filesystem::file_size(samples_path) / 1e6);
  }
  {
    counting_buffer counted;
    std::ostream sink{&counted};
    const auto output_begin = clock_type::now();
    db::write_format(format_id::perfetto, profile, sink);
    const double seconds = seconds_since(output_begin);
    if (!streamed) all_seconds += seconds;
    line += fmt::format("  perfetto from the database {:.3f} s {:.1f} MB", seconds, counted.bytes / 1e6);
  }
  fmt::print("  outputs:{}\n", line);
  // The HTML timeline's CPU use, side by side: from the writer's time buckets (what the page
  // draws) and from a pass over the samples (what it drew before sample_timeline).
  {
    const auto origin_ns = earliest_sample_ns(profile), span_ns = std::max<long>(1, samples) * 125'000;
    auto timed = [&](bool read_samples) {
      const auto timing_begin = clock_type::now();
      const auto timeline = db::bin_cpu_time(profile, {}, origin_ns, span_ns, 255, read_samples);
      return std::pair{seconds_since(timing_begin), timeline.from_buckets};
    };
    const auto [bucket_seconds, from_buckets] = timed(false);
    const auto sample_seconds = timed(true).first;
    fmt::print("  html timeline: {:.3f} s from {}, {:.3f} s from the samples ({:.0f}x)\n", bucket_seconds,
               from_buckets ? "the time buckets" : "the samples (buckets too wide)", sample_seconds,
               sample_seconds / std::max(bucket_seconds, 1e-6));
  }
  fmt::print(
      "  exit work: {:.3f} s with the default formats ({}), {:.3f} s with all; "
      "writer's finish {:.3f} s; outputs' peak memory {:.1f} MiB above {:.1f} MiB\n",
      default_seconds, db::default_exit_format_names, all_seconds, finish_seconds, peak_mib() - peak_before,
      peak_before);
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);
  std::filesystem::remove(samples_path);
}

}  // namespace

int main(int argc, char** argv) {
  const bool streamed = !(argc > 2 && std::string_view{argv[2]} == "unstreamed");
  for (const auto samples : counts_from(argc > 1 ? argv[1] : "10000,100000,1000000")) run(samples, streamed);
}
