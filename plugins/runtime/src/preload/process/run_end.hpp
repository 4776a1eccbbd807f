#pragma once
// The end of a run's image: the stages stopped, everything delivered into the database, the
// outputs written and the exit line said (docs/outputs.md).
#include <string>

namespace kairos::runtime {

// Stops the stages, delivers everything, closes the database; writes the outputs and says what
// was written. Nothing recorded: nothing written. Before an exec, the database is left for the
// next image, which goes on with it and writes the outputs (one profile per chain): returns
// whether a database was left so.
bool write_everything(const std::string& end_reason, bool before_exec);
// The exec failed and the image goes on: the profile it left is continued, the failure noted.
void continue_after_failed_exec();

}  // namespace kairos::runtime
