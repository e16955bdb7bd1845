// The fcgi-host contender of the sqlite scenario of scripts/bench-workloads.sh: one indexed
// lookup by a random key in a small SQLite file per request, as work_sqlite.c and work_sqlite.php
// do. Loaded with `fcgi-host --app libbench_sqlite.so`; the file is named by the environment
// (BENCH_SQLITE_DB, passed with --env).
//   /sqlite   SELECT name, value FROM items WHERE k = ?  (k random in 1..BENCH_SQLITE_ROWS)
// FCGI_HOST_PLUGIN, not the thread-safe form: with --threads each handler thread gets its own
// instance, so each thread has its own connection and prepared statement (opened in
// on_thread_start(), after fork) and nothing is shared or locked between threads.
#include "app/handler.hpp"
#include "app/plugin.hpp"

#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

namespace {

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct FinalizeStatement {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

class SqliteApp : public app::Handler {
public:
  // With --threads 1 the loop runs the handler: the worker's instance opens its connection here.
  void on_worker_start() override { open(); }
  // With --threads T > 1: each thread's own instance, in that thread.
  void on_thread_start() override { open(); }

  void handle(const app::Request& request, app::Response& response) override {
    response.set_header("Content-Type", "text/plain");
    if (request.path() != "/sqlite" || !lookup_) {
      response.body = "OK";
      return;
    }
    sqlite3_stmt* stmt = lookup_.get();
    sqlite3_bind_int64(stmt, 1, static_cast<std::int64_t>(pick_(random_)));
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      response.body.assign(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                           static_cast<std::size_t>(sqlite3_column_bytes(stmt, 0)));
      response.body += ' ' + std::to_string(sqlite3_column_int64(stmt, 1)) + '\n';
    } else {
      response.status = 404;
      response.body = "no row\n";
    }
    sqlite3_reset(stmt);
  }

private:
  void open() {
    if (db_) return; // the worker's instance may also be a thread's
    const char* path = env_or("BENCH_SQLITE_DB", "bench.sqlite");
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nullptr);
    db_.reset(db);
    if (rc != SQLITE_OK)
      throw std::runtime_error(std::string("cannot open ") + path + ": " +
                               (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT name, value FROM items WHERE k = ?", -1, &stmt, nullptr) !=
        SQLITE_OK)
      throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db));
    lookup_.reset(stmt);
    long rows = std::strtol(env_or("BENCH_SQLITE_ROWS", "10000"), nullptr, 10);
    pick_ = std::uniform_int_distribution<long>(1, rows > 0 ? rows : 1);
  }

  std::unique_ptr<sqlite3, CloseDb> db_;
  std::unique_ptr<sqlite3_stmt, FinalizeStatement> lookup_; // declared after db_: finalized first
  std::minstd_rand random_{std::random_device{}()};
  std::uniform_int_distribution<long> pick_{1, 10000};
};

} // namespace

FCGI_HOST_PLUGIN(SqliteApp)
