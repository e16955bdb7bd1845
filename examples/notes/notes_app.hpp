#pragma once
// The notes example: a small JSON API on SQLite, the shape of a real service.
//
//   GET    /notes             list (?limit=1..100, default 20; ?offset=N), newest first
//   GET    /notes/{id}        one note, 404 when there is none
//   POST   /notes             create from {"title": "...", "body": "..."}: 201 and Location
//   PUT    /notes/{id}        replace title and body
//   DELETE /notes/{id}        204
//
// Errors are JSON too: {"error": "..."}: 400 for a body that is not JSON, 415 for another content
// type, 422 when a field is missing, of the wrong type or too long, 404, 405.
//
// Each worker opens its own connection in on_worker_start (SQLite connections are not to be
// shared across processes), in WAL mode with a busy timeout so that workers writing at once wait
// for each other instead of failing. With --threads, each handler thread has its own instance
// (FCGI_HOST_PLUGIN) and opens its own connection in on_thread_start: a connection per thread,
// never one shared by threads.
#include "app/router.hpp"

#include <memory>
#include <string>

namespace notes {

class Db;

class NotesApp : public app::Router {
public:
  explicit NotesApp(std::string db_path);
  ~NotesApp() override;

  void on_worker_start() override;
  void on_worker_stop() override;
  void on_thread_start() override;
  void on_thread_stop() override;

private:
  Db& db();
  void connect();
  std::string db_path_;
  std::unique_ptr<Db> db_;
};

} // namespace notes
