// Collapsed stacks (`folded` format): one line per stack, weights in microseconds of CPU.
#include <kairos/plugins/database/outputs.hpp>

#include <unordered_map>

#include "output_helpers.hpp"

namespace kairos::database {

using namespace output_helpers;

void write_folded(connection& profile, std::ostream& out, const window_range& range) {
  std::unordered_map<std::int64_t, std::int64_t> weights;  // stack -> weight
  for (const auto& sum : output_helpers::stack_sums(profile, range))
    if (sum.stack != 0) weights[sum.stack] += sum.weight_ns;
  // Paths are built from the root of the trie down, once per stack node, and written in their order.
  auto folded = profile.prepare(R"sql(
    WITH RECURSIVE path (id, text) AS (
      SELECT stack.id, function.value FROM stack
      JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function
      WHERE stack.parent IS NULL
      UNION ALL
      SELECT stack.id, path.text || ';' || function.value FROM stack
      JOIN path ON stack.parent = path.id
      JOIN frame ON frame.id = stack.frame JOIN string AS function ON function.id = frame.function)
    SELECT path.id, path.text FROM path ORDER BY path.text)sql");
  while (folded.step()) {
    const auto weight = weights.find(folded.integer(0));
    if (weight == weights.end()) continue;
    const auto weight_us = (weight->second + 500) / 1000;
    if (weight_us > 0) out << folded.text(1) << ' ' << weight_us << '\n';
  }
}

}  // namespace kairos::database
