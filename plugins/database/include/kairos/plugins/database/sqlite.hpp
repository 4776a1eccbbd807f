#pragma once
// A thin RAII layer over SQLite's C API: a connection, prepared statements, transactions.
// Every failure throws database_error naming the database file and SQLite's message.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kairos::database {

// One sentence naming the file and what to do, with no "[kairos]" prefix: whoever prints it adds
// that (run_report/run_merge, the tools, the runtime's report(), the Python package).
class database_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class statement;

class connection {
 public:
  enum class mode { read_only, read_write, create };
  connection(const std::string& path, mode open_mode);
  connection(connection&& other) noexcept;
  connection& operator=(connection&&) = delete;
  connection(const connection&) = delete;
  ~connection();

  void execute(std::string_view sql);  // one or more statements, no results
  statement prepare(std::string_view sql);
  std::int64_t last_insert_id() const;
  std::int64_t changes() const;  // rows the last INSERT, UPDATE or DELETE touched
  const std::string& path() const noexcept { return path_; }
  sqlite3* handle() const noexcept { return handle_; }

  [[noreturn]] void fail(std::string_view what) const;

 private:
  sqlite3* handle_ = nullptr;
  std::string path_;
};

class statement {
 public:
  statement(connection& owner, std::string_view sql);
  statement(statement&& other) noexcept;
  statement& operator=(statement&&) = delete;
  statement(const statement&) = delete;
  ~statement();

  // Binds are 1-based, as in SQL.
  statement& bind(int index, std::int64_t value);
  statement& bind(int index, double value);
  statement& bind(int index, std::string_view value);
  statement& bind_null(int index);
  int parameter_index(std::string_view name) const;  // ":name"'s index; 0 when the SQL has none

  bool step();  // true while a row is available
  void run();   // step once, expect no row, and reset for the next use
  void reset();

  std::int64_t integer(int column) const;
  double real(int column) const;
  std::string_view text(int column) const;
  bool is_null(int column) const;

 private:
  connection* owner_;
  sqlite3_stmt* handle_ = nullptr;
};

// BEGIN on construction; COMMIT on commit(); ROLLBACK if destroyed uncommitted.
class transaction {
 public:
  explicit transaction(connection& owner);
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  ~transaction();
  void commit();

 private:
  connection& owner_;
  bool open_ = true;
};

}  // namespace kairos::database
