// The notes example as a plugin: fcgi-host --app ./libnotes_app.so
// The database file is $NOTES_DB (default notes.db in the working directory), created on first
// start; every worker opens its own connection to it.
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
