// Links the installed kairos::database (and, through the package config, SQLite3).
#include <kairos/plugins/database.hpp>

int main() {
  try {
    kairos::database::open_profile("/nonexistent-directory/profile.db");
  } catch (const kairos::database::database_error&) {
    return 0;  // refused by name, as documented
  }
  return 1;
}
