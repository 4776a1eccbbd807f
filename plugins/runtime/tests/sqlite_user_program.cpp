// A program that uses SQLite the way real ones do, for the isolation tests (isolation_tests.py):
//   config             sqlite3_config(SQLITE_CONFIG_SINGLETHREAD) before any other call, then a
//                      table round trip; prints what each step returned
//   own-open PATH      defines its own sqlite3_open (an interposer: it counts calls and forwards
//                      to sqlite3_open_v2) and opens PATH through it
#include <sqlite3.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {
int own_open_calls = 0;

int round_trip(sqlite3* db) {
  char* error = nullptr;
  const int created =
      sqlite3_exec(db, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);", nullptr, nullptr, &error);
  sqlite3_free(error);
  sqlite3_stmt* statement = nullptr;
  long long sum = -1;
  if (sqlite3_prepare_v2(db, "SELECT SUM(x) FROM t", -1, &statement, nullptr) == SQLITE_OK &&
      sqlite3_step(statement) == SQLITE_ROW)
    sum = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  std::printf("create=%d sum=%lld\n", created, sum);
  return created == SQLITE_OK && sum == 6 ? 0 : 1;
}
}  // namespace

// The program's own sqlite3_open: symbol interposition, as a program (or a library it loads)
// may do. kairos's SQLite is private, so kairos's database never goes through it.
extern "C" int sqlite3_open(const char* path, sqlite3** db) {
  ++own_open_calls;
  return sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "config") {
    const int configured = sqlite3_config(SQLITE_CONFIG_SINGLETHREAD);
    std::printf("config=%d\n", configured);
    sqlite3* db = nullptr;
    std::printf("open=%d\n", sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr));
    const int status = round_trip(db);
    sqlite3_close(db);
    return configured == SQLITE_OK ? status : 1;
  }
  if (mode == "own-open" && argc > 2) {
    sqlite3* db = nullptr;
    const int opened = sqlite3_open(argv[2], &db);
    std::printf("open=%d own_open_calls=%d\n", opened, own_open_calls);
    const int status = round_trip(db);
    sqlite3_close(db);
    return status;
  }
  std::fprintf(stderr, "usage: sqlite_user_program config|own-open PATH\n");
  return 2;
}
