/*
 * The libfcgi C contender of the sqlite scenario of scripts/bench-workloads.sh: an FCGX_Accept_r
 * loop under spawn-fcgi, one SQLite connection per process (opened before the loop), one
 * indexed lookup by a random key per request, as sqlite_plugin.cpp and work_sqlite.php do:
 *   /sqlite   SELECT name, value FROM items WHERE k = ?  (k random in 1..BENCH_SQLITE_ROWS)
 * The file is named by the environment: BENCH_SQLITE_DB.
 */
#include <fcgiapp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
  const char* path = getenv("BENCH_SQLITE_DB");
  const char* rows_text = getenv("BENCH_SQLITE_ROWS");
  long rows = rows_text ? strtol(rows_text, NULL, 10) : 10000;
  sqlite3* db = NULL;
  sqlite3_stmt* lookup = NULL;
  FCGX_Request r;
  if (!path || rows < 1) {
    fprintf(stderr, "work_sqlite: BENCH_SQLITE_DB and BENCH_SQLITE_ROWS (> 0) are needed\n");
    return 1;
  }
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT name, value FROM items WHERE k = ?", -1, &lookup, NULL) !=
          SQLITE_OK) {
    fprintf(stderr, "work_sqlite: %s: %s\n", path, db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return 1;
  }
  srandom((unsigned)getpid());
  if (FCGX_Init() != 0 || FCGX_InitRequest(&r, 0, 0) != 0) return 1;
  while (FCGX_Accept_r(&r) >= 0) {
    const char* script = FCGX_GetParam("SCRIPT_NAME", r.envp);
    if (!script || strcmp(script, "/sqlite") != 0) {
      FCGX_PutS("Content-Type: text/plain\r\n\r\nOK", r.out);
      continue;
    }
    sqlite3_bind_int64(lookup, 1, 1 + random() % rows);
    if (sqlite3_step(lookup) == SQLITE_ROW)
      FCGX_FPrintF(r.out, "Content-Type: text/plain\r\n\r\n%s %lld\n",
                   (const char*)sqlite3_column_text(lookup, 0),
                   (long long)sqlite3_column_int64(lookup, 1));
    else
      FCGX_PutS("Status: 404\r\nContent-Type: text/plain\r\n\r\nno row\n", r.out);
    sqlite3_reset(lookup);
  }
  sqlite3_finalize(lookup);
  sqlite3_close(db);
  return 0;
}
