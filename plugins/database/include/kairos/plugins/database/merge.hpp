#pragma once
// Many profile databases (one per process, or merged ones) copied into one (docs/merge.md): ids
// renumbered, strings, frames and stacks interned across the inputs, each process's rows kept
// apart by their process row. Inputs are read one at a time and each is committed on its own, so
// memory is bounded by one input plus the distinct strings, frames and stacks, and an input that
// fails leaves nothing of itself behind and takes nothing already merged with it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

// What one input added.
struct merged_input {
  std::int64_t processes = 0;
  std::int64_t samples = 0;             // CPU-time and real-time samples
  std::vector<std::string> launch_ids;  // of its processes, each once (a process without one adds none)
};

class merger {
 public:
  // Creates `output` (it must not exist yet) with the current schema.
  explicit merger(const std::string& output);
  ~merger();
  merger(const merger&) = delete;
  merger& operator=(const merger&) = delete;

  // Copies one input in one transaction, whatever its launch (kairos-merge checks that the inputs
  // are of one launch by what add() returns). Throws database_error naming the input when it is not a
  // kairos profile, has another schema version, is corrupt, or holds a process already merged
  // (the same launch id, host and pid; without a launch id, the same host, pid and start time);
  // then nothing of it is kept and the merger takes the next input as if it had not been given.
  merged_input add(const std::string& input);

  // Syncs the output to disk (add() commits each input to the file, but syncs nothing); throws
  // database_error when it cannot.
  void finish();

  // Totals over the inputs merged so far.
  std::int64_t processes() const noexcept { return processes_; }
  std::int64_t samples() const noexcept { return samples_; }
  connection& database() noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
  std::int64_t processes_ = 0, samples_ = 0;
};

}  // namespace kairos::database
