#include "fcgi_host/cli/master_control.hpp"

#include "app/args.hpp"

#include <charconv>
#include <csignal>

namespace fcgi_host {

EndpointReply control_master(process_manager::Master& master, std::string_view verb,
                             std::string_view args) {
  app::Args a;
  a.parse(args);
  if (a.has("pool")) return plain_reply(404, "this master runs no pools\n");
  if (verb == "reload") {
    // The master's loop takes it as it takes the signal: the same reload, logged the same way.
    ::raise(SIGHUP);
    return plain_reply(200, "reloading\n");
  }
  if (verb == "scale") {
    std::string_view text = a.get("workers");
    int n = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), n);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() || n < 1 || n > 512)
      return plain_reply(400, "scale: workers=N, 1 to 512\n");
    return plain_reply(200, std::to_string(master.resize(n)) + " worker(s)\n");
  }
  return plain_reply(404, "unknown control '" + std::string(verb) + "' (reload, scale)\n");
}

} // namespace fcgi_host
