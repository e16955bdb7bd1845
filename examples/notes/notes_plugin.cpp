// The notes example as a plugin: fcgi-host --app ./libnotes_app.so
// The database file is $NOTES_DB (default notes.db in the working directory), created on first
// start; every worker opens its own connection to it. SQLite creates the file and its -wal and
// -shm files beside it as the workers' user, so its directory must be writable by that user:
// started as root, fcgi-host runs the workers as nobody unless --user names another, e.g.
//   install -d -o nobody /var/lib/notes   (or --user notes, owner of /var/lib/notes)
#include "app/plugin.hpp"
#include "notes_app.hpp"

#include <cstdlib>

namespace {

class NotesPlugin : public notes::NotesApp {
public:
  NotesPlugin() : NotesApp(database_path()) {}

private:
  static std::string database_path() {
    const char* path = std::getenv("NOTES_DB");
    return path && *path ? path : "notes.db";
  }
};

} // namespace

FCGI_HOST_PLUGIN(NotesPlugin)
