#pragma once
// "[kairos] ..." lines on stderr: each written with one write(2), so lines from several threads or
// processes never interleave, and nothing goes through the program's stdio buffers.
#include <string_view>

namespace kairos::runtime {

void print_line(std::string_view line);  // adds "[kairos] " unless present, and the newline
// Keeps a private copy of stderr (close-on-exec): programs such as coreutils close fd 2 in their
// own atexit handlers, before kairos's summary at exit. release_stderr() drops it (forked child).
void keep_stderr();
void release_stderr();
// KAIROS_VERBOSE, set once the settings are loaded (0 before).
int verbosity();
void set_verbosity(int level);

}  // namespace kairos::runtime
