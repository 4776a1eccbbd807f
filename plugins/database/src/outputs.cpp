#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <kairos/plugins/database/schema.hpp>
#include <kairos/printable.hpp>

namespace kairos::database {
namespace {

struct function_row {
  std::string name;
  std::int64_t self_ns;
  std::int64_t total_ns;
};

struct thread_row {
  std::int64_t id;
  std::int64_t sequent_id;
  std::int64_t tid;
  std::int64_t pid;
  std::string name;
  std::int64_t samples;
  std::int64_t weight_ns;
};

std::int64_t scalar(connection& profile, const char* sql) {
  auto query = profile.prepare(sql);
  return query.step() ? query.integer(0) : 0;
}

std::vector<thread_row> sampled_threads(connection& profile) {
  std::vector<thread_row> rows;
  auto query = profile.prepare(
      "SELECT threads.id, threads.sequent_id, threads.tid, threads.pid, COALESCE(threads.name, ''), "
      "       COUNT(sample.id), COALESCE(SUM(sample.weight_ns), 0) "
      "FROM threads LEFT JOIN sample ON sample.thread = threads.id "
      "GROUP BY threads.id ORDER BY threads.sequent_id");
  while (query.step())
    rows.push_back({query.integer(0), query.integer(1), query.integer(2), query.integer(3),
                    std::string{query.text(4)}, query.integer(5), query.integer(6)});
  return rows;
}

// Every thread's function weights from one pass over top_functions_by_thread (its rows are
// threads x distinct functions, however many samples there are), ranked, the longest lists cut.
struct function_weights {
  std::vector<function_row> overall;
  std::map<std::int64_t, std::vector<function_row>> by_thread;
};

void rank(std::vector<function_row>& rows, std::size_t limit) {
  std::sort(rows.begin(), rows.end(), [](const function_row& a, const function_row& b) {
    return std::tie(b.self_ns, b.total_ns, a.name) < std::tie(a.self_ns, a.total_ns, b.name);
  });
  if (rows.size() > limit) rows.resize(limit);
}

function_weights weigh_functions(connection& profile, std::size_t limit) {
  function_weights weights;
  std::map<std::string, function_row> overall;
  auto query = profile.prepare("SELECT thread, name, self, total FROM top_functions_by_thread");
  while (query.step()) {
    function_row row{std::string{query.text(1)}, query.integer(2), query.integer(3)};
    auto& sum = overall.try_emplace(row.name, function_row{row.name, 0, 0}).first->second;
    sum.self_ns += row.self_ns;
    sum.total_ns += row.total_ns;
    weights.by_thread[query.integer(0)].push_back(std::move(row));
  }
  for (auto& [name, row] : overall) weights.overall.push_back(std::move(row));
  rank(weights.overall, limit);
  for (auto& [thread, rows] : weights.by_thread) rank(rows, limit);
  return weights;
}

double percent(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void write_table(std::ostream& out, const std::string& title, const std::vector<function_row>& rows,
                 std::int64_t weight_ns) {
  out << fmt::format("{}\n{:>7} {:>12} {:>7} {:>12}  {}\n", title, "SELF %", "SELF ms", "TOTAL %",
                     "TOTAL ms", "FUNCTION");
  for (const auto& row : rows)
    out << fmt::format("{:>7.1f} {:>12.3f} {:>7.1f} {:>12.3f}  {}\n", percent(row.self_ns, weight_ns),
                       row.self_ns * 1e-6, percent(row.total_ns, weight_ns), row.total_ns * 1e-6,
                       printable(row.name));
  out << '\n';
}

// Every name in a JSON output: shown as kairos::printable shows it (escaped, capped).
std::string json_string(std::string_view text) {
  return nlohmann::json(printable(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void write_text(connection& profile, std::ostream& out, const text_options& options) {
  const auto samples = scalar(profile, "SELECT COUNT(*) FROM sample");
  const auto weight_ns = scalar(profile, "SELECT COALESCE(SUM(weight_ns), 0) FROM sample");
  const auto threads = sampled_threads(profile);
  out << fmt::format("kairos profile: {} samples standing for {:.3f} s of CPU time, {} threads\n\n",
                     samples, weight_ns * 1e-9, threads.size());
  if (samples == 0) {
    out << "no samples were recorded\n";
    return;
  }
  auto weights = weigh_functions(profile, options.functions);
  write_table(out, "top functions, all threads", weights.overall, weight_ns);
  if (!options.per_thread) return;
  for (const auto& thread : threads) {
    if (thread.samples == 0) continue;
    write_table(out,
                fmt::format("thread {} (tid {}{}{}): {} samples, {:.1f}% of the weight",
                            thread.sequent_id, thread.tid, thread.name.empty() ? "" : ", ",
                            printable(thread.name), thread.samples, percent(thread.weight_ns, weight_ns)),
                weights.by_thread[thread.id], thread.weight_ns);
  }
}

void write_summary_json(connection& profile, std::ostream& out, const text_options& options) {
  const auto weight_ns = scalar(profile, "SELECT COALESCE(SUM(weight_ns), 0) FROM sample");
  auto weights = weigh_functions(profile, options.functions);
  auto functions_json = [&](const std::vector<function_row>& ranked, std::int64_t whole) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : ranked)
      rows.push_back({{"name", printable(row.name)},
                      {"self_ns", row.self_ns},
                      {"total_ns", row.total_ns},
                      {"self_percent", percent(row.self_ns, whole)},
                      {"total_percent", percent(row.total_ns, whole)}});
    return rows;
  };
  nlohmann::json summary{{"schema_version", schema_version},
                         {"samples", scalar(profile, "SELECT COUNT(*) FROM sample")},
                         {"weight_ns", weight_ns},
                         {"top_functions", functions_json(weights.overall, weight_ns)},
                         {"threads", nlohmann::json::array()}};
  auto metadata = profile.prepare("SELECT key, value FROM metadata ORDER BY key");
  while (metadata.step()) summary["metadata"][std::string{metadata.text(0)}] = metadata.text(1);
  for (const auto& thread : sampled_threads(profile))
    summary["threads"].push_back({{"sequent_id", thread.sequent_id},
                                  {"tid", thread.tid},
                                  {"name", printable(thread.name)},
                                  {"samples", thread.samples},
                                  {"weight_ns", thread.weight_ns},
                                  {"top_functions", functions_json(weights.by_thread[thread.id], thread.weight_ns)}});
  out << summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

void write_trace(connection& profile, std::ostream& out) {
  // Timestamps in microseconds from the earliest event, as the format expects.
  const auto origin_ns = scalar(profile,
                                "SELECT MIN(t) FROM (SELECT MIN(time_ns) AS t FROM sample "
                                "UNION ALL SELECT MIN(start_ns) FROM region)");
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  auto processes = profile.prepare(
      "SELECT process.pid, COALESCE(command.value, '') FROM process "
      "LEFT JOIN string AS command ON command.id = process.command");
  while (processes.step()) {
    separator();
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})",
                       processes.integer(0), json_string(processes.text(1)));
  }
  auto threads = profile.prepare("SELECT pid, tid, COALESCE(name, ''), sequent_id FROM threads");
  while (threads.step()) {
    separator();
    const auto name = threads.text(2).empty() ? fmt::format("thread {}", threads.integer(3))
                                              : std::string{threads.text(2)};
    out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                       threads.integer(0), threads.integer(1), json_string(name));
  }
  auto regions = profile.prepare(
      "SELECT regions.name, threads.pid, threads.tid, regions.start_ns, regions.duration_ns "
      "FROM regions JOIN threads ON threads.id = regions.thread ORDER BY regions.start_ns");
  while (regions.step()) {
    separator();
    out << fmt::format(R"({{"ph":"X","cat":"region","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f}}})",
                       json_string(regions.text(0)), regions.integer(1), regions.integer(2),
                       (regions.integer(3) - origin_ns) * 1e-3, regions.integer(4) * 1e-3);
  }
  auto samples = profile.prepare(
      "SELECT samples.leaf, threads.pid, threads.tid, samples.time_ns, samples.stack, samples.weight "
      "FROM samples JOIN threads ON threads.id = samples.thread ORDER BY samples.time_ns");
  while (samples.step()) {
    separator();
    const auto leaf = samples.is_null(0) ? std::string_view{"<no stack>"} : samples.text(0);
    out << fmt::format(R"({{"ph":"i","s":"t","cat":"sample","name":{},"pid":{},"tid":{},"ts":{:.3f})",
                       json_string(leaf), samples.integer(1), samples.integer(2),
                       (samples.integer(3) - origin_ns) * 1e-3);
    if (!samples.is_null(4)) out << fmt::format(R"(,"sf":"{}")", samples.integer(4));
    out << fmt::format(R"(,"args":{{"weight_ns":{}}}}})", samples.integer(5));
  }
  out << "\n],\"stackFrames\":{";
  auto frames = profile.prepare(
      "SELECT stack.id, stack.parent, function.value FROM stack "
      "JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function "
      "ORDER BY stack.id");
  first = true;
  while (frames.step()) {
    separator();
    out << fmt::format(R"("{}":{{"name":{})", frames.integer(0), json_string(frames.text(2)));
    if (!frames.is_null(1)) out << fmt::format(R"(,"parent":"{}")", frames.integer(1));
    out << '}';
  }
  out << "}}\n";
}

void write_folded(connection& profile, std::ostream& out) {
  // Paths are built from the root of the trie down, once per stack node that was sampled.
  auto folded = profile.prepare(R"sql(
    WITH RECURSIVE path (id, text) AS (
      SELECT stack.id, function.value FROM stack
      JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function
      WHERE stack.parent IS NULL
      UNION ALL
      SELECT stack.id, path.text || ';' || function.value FROM stack
      JOIN path ON stack.parent = path.id
      JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function),
    weights AS (SELECT stack, SUM(weight_ns) AS weight_ns FROM sample
                WHERE stack IS NOT NULL GROUP BY stack)
    SELECT path.text, weights.weight_ns FROM weights JOIN path ON path.id = weights.stack
    ORDER BY path.text)sql");
  while (folded.step()) {
    const auto weight_us = (folded.integer(1) + 500) / 1000;
    if (weight_us > 0) out << folded.text(0) << ' ' << weight_us << '\n';
  }
}

}  // namespace kairos::database
