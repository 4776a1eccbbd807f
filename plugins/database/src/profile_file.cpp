#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <kairos/plugins/database/metadata_keys.hpp>
#include <kairos/plugins/database/schema.hpp>

#include "schema_image.hpp"

namespace kairos::database {

// Created exclusively (O_EXCL), never through a symlink (O_NOFOLLOW): a name that exists, or a
// link planted there, is an error, in one step with no window between a check and the create.
// The new file gets the schema as a file image made at build time (schema_image_generator.cpp):
// creating the schema's tables and views with SQL cost every profiled process several times what
// opening the image costs, its schema's parse (docs/performance-log.md, "Measured reasons in the
// code").
connection create_profile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST)
      throw database_error("the database '" + path +
                           "' already exists; kairos never appends to or overwrites a profile");
    throw database_error("cannot create the database '" + path + "': " + std::strerror(errno));
  }
  // A journal beside a file that did not exist belongs to no database (one deleted without it):
  // left there, SQLite would roll it back into the new file.
  ::unlink((path + "-journal").c_str());
  std::size_t written = 0;
  while (written < schema_image_size) {
    const auto count = ::write(fd, schema_image + written, schema_image_size - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const std::string reason = count < 0 ? std::strerror(errno) : "nothing written";
      ::close(fd);
      ::unlink(path.c_str());
      throw database_error("cannot write the database '" + path + "': " + reason);
    }
    written += static_cast<std::size_t>(count);
  }
  ::close(fd);
  connection database{path, connection::mode::create};
  use_write_settings(database);
  return database;
}

namespace {

// A profile's program holds its lock until it ends (the runtime's writer, docs/database.md): a
// reader is told so, not that the file is no profile.
database_error locked(const std::string& path) {
  return database_error("'" + path + "' is locked by the program writing it: a profile can be read once " +
                        "its program has ended");
}

// Throws naming the file when it is no kairos profile, or one of another schema version.
void check_schema_version(connection& database, const std::string& path) {
  std::string found;
  try {
    auto version = database.prepare("SELECT value FROM metadata WHERE key = ?");
    version.bind(1, metadata_key::schema_version);
    if (version.step()) found = std::string{version.text(0)};
  } catch (const database_error&) {
    if (sqlite3_errcode(database.handle()) == SQLITE_BUSY) throw locked(path);
    throw database_error("'" + path + "' is not a kairos profile database");
  }
  if (found != std::to_string(schema_version))
    throw database_error("'" + path + "' has schema version '" + found + "'; this kairos reads version " +
                         std::to_string(schema_version));
}

// A writer killed during a commit leaves its journal hot (its header whole); a read-only connection
// cannot roll it back and would read nothing. One read-write open does (SQLite rolls back on the
// first read), as any SQLite client's would. A journal left between commits (PERSIST zeroes its
// header) or none: nothing to do.
void roll_back_a_killed_commit(const std::string& path) {
  constexpr unsigned char journal_magic[8] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};
  const auto journal = path + "-journal";
  const int fd = ::open(journal.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  unsigned char header[sizeof journal_magic] = {};
  const auto read = ::pread(fd, header, sizeof header, 0);
  ::close(fd);
  if (read != static_cast<ssize_t>(sizeof header) || std::memcmp(header, journal_magic, sizeof header) != 0) return;
  std::optional<connection> database;
  try {
    database.emplace(path, connection::mode::read_write);
    database->execute("SELECT count(*) FROM sqlite_master");
  } catch (const database_error& error) {
    if (database && sqlite3_errcode(database->handle()) == SQLITE_BUSY) throw locked(path);
    throw database_error("'" + path + "' was left in the middle of a commit, and its journal '" + journal +
                         "' cannot be rolled back here (" + error.what() +
                         "); open it once where it can be written, with kairos or any SQLite client");
  }
}

}  // namespace

connection open_profile(const std::string& path) {
  roll_back_a_killed_commit(path);
  connection database{path, connection::mode::read_only};
  // The outputs' queries build temporary tables (materialized CTEs, sorts of stacks and names;
  // never of samples: output_helpers.hpp). In temporary files each costs file creation and
  // writes, several times the same work in memory for a small profile. A large profile keeps them
  // in files, where a query of a user's own (a view) cannot exhaust memory.
  // Set before the transaction below: SQLite refuses to change it inside one.
  constexpr std::uintmax_t in_memory_below_bytes = 256u << 20;
  std::error_code unknown_size;
  if (const auto size = std::filesystem::file_size(path, unknown_size); !unknown_size && size < in_memory_below_bytes)
    database.execute("PRAGMA temp_store = MEMORY");
  // One read transaction for the connection's life: every query sees the same snapshot, and the
  // file's lock, journal and change counter are checked once, not around each of the fifty
  // queries a text report and a trace make (four system calls each).
  database.execute("BEGIN");
  check_schema_version(database, path);
  return database;
}

connection reopen_profile(const std::string& path) {
  connection database{path, connection::mode::read_write};
  use_write_settings(database);
  check_schema_version(database, path);
  return database;
}

}  // namespace kairos::database
