#include <sqlite3.h>

#include <kairos/plugins/database/sqlite.hpp>

namespace kairos::database {

connection::connection(const std::string& path, mode open_mode) : path_{path} {
  const int flags = open_mode == mode::read_only    ? SQLITE_OPEN_READONLY
                    : open_mode == mode::read_write ? SQLITE_OPEN_READWRITE
                                                    : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &handle_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const std::string message = handle_ != nullptr ? sqlite3_errmsg(handle_) : "out of memory";
    sqlite3_close(handle_);
    handle_ = nullptr;
    throw database_error("cannot open the database '" + path + "': " + message);
  }
  sqlite3_busy_timeout(handle_, 5000);
  sqlite3_extended_result_codes(handle_, 1);
}

connection::connection(connection&& other) noexcept : handle_{other.handle_}, path_{std::move(other.path_)} {
  other.handle_ = nullptr;
}

connection::~connection() { sqlite3_close_v2(handle_); }

void connection::fail(std::string_view what) const {
  throw database_error("database '" + path_ + "': " + std::string{what} + ": " + sqlite3_errmsg(handle_));
}

void connection::execute(std::string_view sql) {
  char* error = nullptr;
  if (sqlite3_exec(handle_, std::string{sql}.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    throw database_error("database '" + path_ + "': " + message + " (in: " + std::string{sql.substr(0, 80)} + ")");
  }
}

statement connection::prepare(std::string_view sql) { return statement{*this, sql}; }

std::int64_t connection::last_insert_id() const { return sqlite3_last_insert_rowid(handle_); }
std::int64_t connection::changes() const { return sqlite3_changes64(handle_); }

statement::statement(connection& owner, std::string_view sql) : owner_{&owner} {
  if (sqlite3_prepare_v3(owner.handle(), sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &handle_,
                         nullptr) != SQLITE_OK)
    owner.fail("cannot prepare '" + std::string{sql.substr(0, 80)} + "'");
}

statement::statement(statement&& other) noexcept : owner_{other.owner_}, handle_{other.handle_} {
  other.handle_ = nullptr;
}

statement::~statement() { sqlite3_finalize(handle_); }

statement& statement::bind(int index, std::int64_t value) {
  if (sqlite3_bind_int64(handle_, index, value) != SQLITE_OK) owner_->fail("bind");
  return *this;
}
statement& statement::bind(int index, double value) {
  if (sqlite3_bind_double(handle_, index, value) != SQLITE_OK) owner_->fail("bind");
  return *this;
}
statement& statement::bind(int index, std::string_view value) {
  if (sqlite3_bind_text(handle_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT) != SQLITE_OK)
    owner_->fail("bind");
  return *this;
}
statement& statement::bind_null(int index) {
  if (sqlite3_bind_null(handle_, index) != SQLITE_OK) owner_->fail("bind");
  return *this;
}

int statement::parameter_index(std::string_view name) const {
  return sqlite3_bind_parameter_index(handle_, std::string{name}.c_str());
}

bool statement::step() {
  const int result = sqlite3_step(handle_);
  if (result == SQLITE_ROW) return true;
  if (result == SQLITE_DONE) return false;
  owner_->fail("step");
}

void statement::run() {
  const int result = sqlite3_step(handle_);
  sqlite3_reset(handle_);
  if (result != SQLITE_DONE && result != SQLITE_ROW) owner_->fail("insert");
}

void statement::reset() { sqlite3_reset(handle_); }

std::int64_t statement::integer(int column) const { return sqlite3_column_int64(handle_, column); }
double statement::real(int column) const { return sqlite3_column_double(handle_, column); }
std::string_view statement::text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(handle_, column));
  return text == nullptr ? std::string_view{}
                         : std::string_view{text, static_cast<std::size_t>(sqlite3_column_bytes(handle_, column))};
}
bool statement::is_null(int column) const { return sqlite3_column_type(handle_, column) == SQLITE_NULL; }

transaction::transaction(connection& owner) : owner_{owner} { owner_.execute("BEGIN"); }
transaction::~transaction() {
  if (open_) sqlite3_exec(owner_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}
void transaction::commit() {
  owner_.execute("COMMIT");
  open_ = false;
}

}  // namespace kairos::database
