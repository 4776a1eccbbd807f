// speedscope's file format (https://www.speedscope.app/file-format-schema.json): one "sampled"
// profile per thread, each distinct stack once with its summed weight (what speedscope's
// left-heavy and sandwich views show; a bounded file however many samples there are), frames
// shared across threads by function name.
#include <kairos/plugins/database/outputs.hpp>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/plugins/database/schema.hpp>

#include "output_helpers.hpp"

namespace kairos::database {

using namespace output_helpers;

namespace {

// The frames every profile shares, one a function name (JSON objects, in index order), and each
// stack node's frame.
class shared_frames {
 public:
  explicit shared_frames(connection& profile) {
    // Stack nodes in id order: a node is inserted after its parent, so its parent's path is known.
    auto stacks = profile.prepare(
        "SELECT stack.id, stack.parent, function.value, COALESCE(file.value, ''), COALESCE(frame.line, 0) "
        "FROM stack JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function "
        "LEFT JOIN string AS file ON file.id = frame.file ORDER BY stack.id");
    std::unordered_map<std::string, std::size_t> frame_of;
    while (stacks.step()) {
      const std::string name{stacks.text(2)};
      auto [found, added] = frame_of.try_emplace(name, frames_.size());
      if (added) {
        std::string frame = fmt::format(R"({{"name":{})", json_string(name));
        if (!stacks.text(3).empty())
          frame += fmt::format(R"(,"file":{},"line":{})", json_string(stacks.text(3)), stacks.integer(4));
        frames_.push_back(frame + '}');
      }
      nodes_[stacks.integer(0)] = {stacks.is_null(1) ? -1 : stacks.integer(1), found->second};
    }
  }
  const std::vector<std::string>& frames() const { return frames_; }
  // The stack's frame indexes, root first: "[0,4,7]".
  std::string path_of(std::int64_t stack) const {
    std::vector<std::size_t> leaf_first;
    for (auto at = nodes_.find(stack); at != nodes_.end(); at = nodes_.find(at->second.parent))
      leaf_first.push_back(at->second.frame);
    return std::string{"["} + fmt::format("{}", fmt::join(leaf_first.rbegin(), leaf_first.rend(), ",")) + ']';
  }

 private:
  struct node {
    std::int64_t parent = -1;
    std::size_t frame = 0;
  };
  std::unordered_map<std::int64_t, node> nodes_;
  std::vector<std::string> frames_;
};

// Threads by weight, heaviest first (speedscope opens the first), each with its stacks in id order.
struct thread_stacks {
  std::int64_t thread = 0, weight_ns = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> stacks;  // stack, weight
};
std::vector<thread_stacks> threads_by_weight(connection& profile, const window_range& range) {
  std::vector<thread_stacks> by_thread;
  for (const auto& sum : stack_sums(profile, range)) {
    if (sum.stack == 0) continue;
    if (by_thread.empty() || by_thread.back().thread != sum.thread) by_thread.push_back({sum.thread, 0, {}});
    auto& thread = by_thread.back();
    thread.weight_ns += sum.weight_ns;
    if (!thread.stacks.empty() && thread.stacks.back().first == sum.stack)  // the same stack in another window
      thread.stacks.back().second += sum.weight_ns;
    else
      thread.stacks.emplace_back(sum.stack, sum.weight_ns);
  }
  for (auto& thread : by_thread) std::sort(thread.stacks.begin(), thread.stacks.end());
  std::stable_sort(by_thread.begin(), by_thread.end(),
                   [](const thread_stacks& a, const thread_stacks& b) { return a.weight_ns > b.weight_ns; });
  return by_thread;
}

}  // namespace

void write_speedscope(connection& profile, std::ostream& out, const window_range& range, std::string_view exporter) {
  const shared_frames frames{profile};
  const auto command = metadata_value(read_metadata(profile), metadata_key::command);
  out << R"({"$schema":"https://www.speedscope.app/file-format-schema.json","exporter":)" << json_string(exporter)
      << R"(,"name":)"
      // speedscope's title: the shares it shows are of what was sampled, so the title says how much that is.
      << json_string(
             fmt::format("{} ({})", command.empty() ? "kairos profile" : command, coverage_text(coverage_of(profile))))
      << R"(,"activeProfileIndex":0,"shared":{"frames":[)";
  for (std::size_t i = 0; i < frames.frames().size(); ++i) out << (i ? "," : "") << frames.frames()[i];
  out << R"(]},"profiles":[)";
  const auto labels = thread_labels(profile);
  bool first_thread = true;
  for (const auto& thread : threads_by_weight(profile, range)) {
    const auto label = labels.find(thread.thread);
    if (label == labels.end()) continue;  // as the join with the thread table: a sample of no thread
    out << (first_thread ? "" : ",") << R"({"type":"sampled","name":)" << json_string(label->second)
        << R"(,"unit":"nanoseconds","startValue":0,"endValue":)" << thread.weight_ns << R"(,"samples":[)";
    first_thread = false;
    std::string weight_list;
    bool first_stack = true;
    for (const auto& [stack, weight] : thread.stacks) {
      out << (first_stack ? "" : ",") << frames.path_of(stack);
      weight_list += fmt::format("{}{}", first_stack ? "" : ",", weight);
      first_stack = false;
    }
    out << R"(],"weights":[)" << weight_list << "]}";
  }
  out << "]}\n";
}

}  // namespace kairos::database
