// A handler built as a plugin library: fcgi-host --app ./libgreeting_plugin.so
#include "app/plugin.hpp"

#include <string>

class Greeting : public app::Handler {
public:
  void handle(const app::Request& req, app::Response& res) override {
    ++served_;
    res.set_content("greetings from a plugin, request " + std::to_string(served_) + " of " +
                        std::string(req.path()) + "\n",
                    "text/plain");
  }

private:
  unsigned long served_ = 0; // per worker: each worker has its own handler
};

FCGI_HOST_PLUGIN(Greeting)
