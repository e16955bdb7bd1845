// The stock fcgi-host executable: the app is chosen with --app.
#include "fcgi_host/run.hpp"

int main(int argc, char** argv) {
  return fcgi_host::run(argc, argv);
}
