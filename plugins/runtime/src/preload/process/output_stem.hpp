#pragma once
// Where this process writes: KAIROS_OUTPUT_PATH expanded into the stem its outputs (<stem>.db,
// <stem>.txt, ...) are named by.
#include <string>

namespace kairos::runtime {

// KAIROS_OUTPUT_PATH expanded for this image, made absolute.
std::string stem_base();
// `base`, or base-1, base-2, ...: the first that names no output.
std::string free_stem(const std::string& base);
// The output stem of this process (a fork child computes its own): KAIROS_OUTPUT_PATH expanded,
// made absolute, with "-1", "-2", ... appended when files of that name exist: kairos never
// overwrites a file.
const std::string& claimed_stem();
std::string database_path_of_this_process();
// A chain's profile is named by the program at its end (KAIROS_OUTPUT_PATH's %exe%), not by the
// wrapper that began it: the database moves to this image's stem when that differs.
std::string stem_of_chain_end(std::string stem, std::string& database_path);

}  // namespace kairos::runtime
