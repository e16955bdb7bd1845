#include "notes_app.hpp"

#include "app/json.hpp"
#include "sqlite.hpp"

#include <charconv>

namespace notes {
namespace {

constexpr std::size_t kMaxTitle = 200;
constexpr std::size_t kMaxBody = 100'000;

nlohmann::json note_json(const Statement& row) {
  return {{"id", row.integer(0)},
          {"title", row.text(1)},
          {"body", row.text(2)},
          {"updated", row.text(3)}};
}

struct NoteInput {
  std::string title;
  std::string body;
};

// The fields of a create or replace: title required (1..200 characters), body optional.
NoteInput parse_note(const app::Request& req) {
  nlohmann::json in = app::read_json(req);
  if (!in.is_object()) throw app::HttpError(422, "expected a JSON object");
  NoteInput note;
  auto title = in.find("title");
  if (title == in.end() || !title->is_string())
    throw app::HttpError(422, "title is required and must be a string");
  note.title = title->get<std::string>();
  if (note.title.empty() || note.title.size() > kMaxTitle)
    throw app::HttpError(422, "title must be 1 to 200 bytes long");
  if (auto body = in.find("body"); body != in.end()) {
    if (!body->is_string()) throw app::HttpError(422, "body must be a string");
    note.body = body->get<std::string>();
    if (note.body.size() > kMaxBody) throw app::HttpError(422, "body is too long");
  }
  return note;
}

long query_number(const app::Request& req, std::string_view name, long fallback, long min,
                  long max) {
  std::string_view text = req.query_arg(name);
  if (text.empty()) return fallback;
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max)
    throw app::HttpError(400, std::string(name) + " must be a number from " + std::to_string(min) +
                                  " to " + std::to_string(max));
  return value;
}

void not_found(app::Response& res) {
  app::write_json(res, {{"error", "no such note"}}, 404);
}

} // namespace

NotesApp::NotesApp(std::string db_path) : db_path_(std::move(db_path)) {
  get("/notes", [this](const app::Request& req, app::Response& res) {
    long limit = query_number(req, "limit", 20, 1, 100);
    long offset = query_number(req, "offset", 0, 0, 1'000'000'000);
    Statement q(db(), "SELECT id, title, body, updated FROM notes ORDER BY id DESC "
                      "LIMIT ?1 OFFSET ?2");
    q.bind(1, limit).bind(2, offset);
    nlohmann::json list = nlohmann::json::array();
    while (q.step())
      list.push_back(note_json(q));
    app::write_json(res, list);
  });
  get("/notes/{id:int}", [this](const app::Request& req, app::Response& res) {
    Statement q(db(), "SELECT id, title, body, updated FROM notes WHERE id = ?1");
    q.bind(1, req.path_param_as<std::int64_t>("id").value_or(0));
    if (!q.step()) return not_found(res);
    app::write_json(res, note_json(q));
  });
  post("/notes", [this](const app::Request& req, app::Response& res) {
    NoteInput note = parse_note(req);
    Statement q(db(), "INSERT INTO notes (title, body) VALUES (?1, ?2) "
                      "RETURNING id, title, body, updated");
    q.bind(1, note.title).bind(2, note.body);
    q.step();
    nlohmann::json created = note_json(q);
    res.set_header("Location", "/notes/" + std::to_string(q.integer(0)));
    app::write_json(res, created, 201);
  });
  put("/notes/{id:int}", [this](const app::Request& req, app::Response& res) {
    NoteInput note = parse_note(req);
    Statement q(db(), "UPDATE notes SET title = ?1, body = ?2, updated = datetime('now') "
                      "WHERE id = ?3 RETURNING id, title, body, updated");
    q.bind(1, note.title).bind(2, note.body);
    q.bind(3, req.path_param_as<std::int64_t>("id").value_or(0));
    if (!q.step()) return not_found(res);
    app::write_json(res, note_json(q));
  });
  del("/notes/{id:int}", [this](const app::Request& req, app::Response& res) {
    Statement q(db(), "DELETE FROM notes WHERE id = ?1");
    q.bind(1, req.path_param_as<std::int64_t>("id").value_or(0));
    q.step();
    if (db().changes() == 0) return not_found(res);
    res.status = 204;
  });

  // Every error as JSON: the client's (HttpError) with its status, anything else a 500 whose
  // details stay in the log.
  on_not_found([](const app::Request&, app::Response& res) {
    app::write_json(res, {{"error", "not found"}}, 404);
  });
  on_method_not_allowed([](const app::Request&, app::Response& res) {
    app::write_json(res, {{"error", "method not allowed"}}, 405);
  });
  on_error([](const app::Request&, app::Response& res, std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const app::HttpError& e) {
      app::write_json(res, {{"error", e.what()}}, e.status());
    } catch (...) {
      app::write_json(res, {{"error", "internal error"}}, 500);
    }
  });
}

NotesApp::~NotesApp() = default;

void NotesApp::connect() {
  db_ = std::make_unique<Db>(db_path_);
  db_->exec("PRAGMA busy_timeout = 5000");
  db_->exec("PRAGMA journal_mode = WAL");
}

void NotesApp::on_worker_start() {
  connect();
  db_->exec("CREATE TABLE IF NOT EXISTS notes ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " title TEXT NOT NULL,"
            " body TEXT NOT NULL DEFAULT '',"
            " updated TEXT NOT NULL DEFAULT (datetime('now')))");
}

void NotesApp::on_worker_stop() {
  db_.reset();
}

// --threads: this thread's instance, its own connection (the table exists: on_worker_start ran
// in the worker before its threads started).
void NotesApp::on_thread_start() {
  connect();
}

void NotesApp::on_thread_stop() {
  db_.reset();
}

Db& NotesApp::db() {
  if (!db_) throw std::logic_error("notes: no database connection (on_worker_start not run)");
  return *db_;
}

} // namespace notes
