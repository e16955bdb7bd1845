#include "fcgi_host/cli/client_commands.hpp"

#include "fcgi_host/cli/help_text.hpp"
#include "fcgi_host/cli/reload_wait.hpp"
#include "fcgi_host/observe/status_page.hpp" // kHostHeader

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

namespace {

struct Options {
  bool ping = false;
  std::string connect;
  std::string path;
  std::string query;
  long max_queue = -1;
  double timeout_s = 5;
  bool help = false;
};

struct Failure {
  int code;
  std::string why;
};

Options parse_options(int argc, char** argv) {
  Options o;
  o.ping = std::string_view(argv[1]) == "ping";
  o.path = o.ping ? "/ping" : "/status";
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Failure{kClientUsage, std::string(a) + ": needs a value"};
      return argv[++i];
    };
    if (a == "--connect")
      o.connect = value();
    else if (a == "--path")
      o.path = value();
    else if (a == "--timeout") {
      std::string v = value();
      char* end = nullptr;
      o.timeout_s = std::strtod(v.c_str(), &end);
      if (*end || !(o.timeout_s > 0)) throw Failure{kClientUsage, "--timeout: seconds > 0"};
    } else if (a == "--max-queue" && !o.ping) {
      std::string v = value();
      auto r = std::from_chars(v.data(), v.data() + v.size(), o.max_queue);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || o.max_queue < 0)
        throw Failure{kClientUsage, "--max-queue: a count >= 0"};
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else if ((a == "--json" || a == "--openmetrics" || a == "--prometheus" || a == "--html") &&
               !o.ping) {
      o.query = std::string(a.substr(2)) + (o.query == "full" ? "&full" : "");
    } else if (a == "--full" && !o.ping) {
      o.query = o.query.empty() ? "full" : o.query + "&full";
    } else {
      throw Failure{kClientUsage, "unknown option '" + std::string(a) + "'"};
    }
  }
  if (o.connect.empty() && !o.help) throw Failure{kClientUsage, "--connect ADDR is required"};
  return o;
}

// ask_host(), its errors as the commands' exit codes. `page`: "status" or "ping" for those
// commands: an answer not from the host (the application's: status and ping pages are off until
// their path is set) then says which option sets the path.
HostReply ask(const std::string& address, const HostQuery& query, std::chrono::milliseconds timeout,
              std::string_view page = {}) {
  try {
    return ask_host(address, query, timeout);
  } catch (const HostQueryError& e) {
    if (e.foreign_status && !page.empty())
      throw Failure{kClientNoAnswer, address + ": no " + std::string(page) + " page at " +
                                         query.path + " (set --" + std::string(page) +
                                         "-path on the host, or --path here): the answer (" +
                                         std::to_string(e.foreign_status) + ") has no " +
                                         std::string(kHostHeader) + " header"};
    throw Failure{e.bad_address ? kClientUsage : kClientNoAnswer, e.what()};
  }
}

// fcgi-host reload [POOL] --connect ADDR, fcgi-host scale [POOL] N --connect ADDR.
int run_control_command(int argc, char** argv) {
  const std::string verb = argv[1];
  std::string connect, pool, workers;
  double timeout_s = 0; // 0: 5 s, or 600 s for a --wait
  bool wait = false;
  std::vector<std::string> words;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << (verb == "scale" ? "Usage: fcgi-host scale [POOL] N --connect ADDR"
                                    : "Usage: fcgi-host reload [POOL] --connect ADDR [--wait]")
                << " [--timeout SECONDS]\n\n"
                << kClientCommandsHelp;
      return kClientHealthy;
    }
    if ((a == "--connect" || a == "--timeout") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--connect") {
        connect = v;
        continue;
      }
      char* end = nullptr;
      timeout_s = std::strtod(v.c_str(), &end);
      if (*end || !(timeout_s > 0)) throw Failure{kClientUsage, "--timeout: seconds > 0"};
    } else if (a == "--wait" && verb == "reload") {
      wait = true;
    } else if (a.starts_with("-")) {
      throw Failure{kClientUsage, "unknown option '" + std::string(a) + "'"};
    } else {
      words.emplace_back(a);
    }
  }
  if (verb == "scale" && !words.empty()) workers = words.back(), words.pop_back();
  if (words.size() > 1 ||
      (verb == "scale" &&
       (workers.empty() || workers.find_first_not_of("0123456789") != std::string::npos)))
    throw Failure{kClientUsage, verb == "scale" ? "usage: fcgi-host scale [POOL] N --connect ADDR"
                                                : "usage: fcgi-host reload [POOL] --connect ADDR"};
  if (connect.empty()) throw Failure{kClientUsage, "--connect ADDR is required"};
  if (!words.empty()) pool = words.front();
  if (wait && !pool.empty())
    throw Failure{kClientUsage, "--wait: one application only (a pool's rollout is on its page)"};
  if (timeout_s == 0) timeout_s = wait ? 600 : 5;
  const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  // The rollout before this reload: --wait follows the one after it.
  const std::uint32_t before =
      wait ? rollout_seen(ask(connect, {"GET", "/status", "", ""}, timeout).body).generation : 0;
  // Appended piece by piece: `"literal" + string` draws a false -Wrestrict of GCC 12 at -O2.
  std::string args;
  if (!pool.empty()) args.append("pool=").append(pool);
  if (!workers.empty()) args.append(args.empty() ? "" : "&").append("workers=").append(workers);
  HostReply r = ask(connect, {"POST", "/control/" + verb, args, ""}, timeout);
  std::cout << r.body << std::flush;
  if (r.status != 200) throw Failure{kClientUnhealthy, "answered " + std::to_string(r.status)};
  if (!wait) return kClientHealthy;
  std::optional<bool> promoted;
  try {
    promoted = wait_for_rollout(connect, before, timeout);
  } catch (const HostQueryError& e) {
    throw Failure{kClientNoAnswer, e.what()};
  }
  if (!promoted)
    throw Failure{kClientNoAnswer, "no outcome of the reload within " +
                                       std::to_string(static_cast<long>(timeout_s)) + " s"};
  std::cout << (*promoted ? "promoted\n" : "undone\n") << std::flush;
  return *promoted ? kClientHealthy : kClientUnhealthy;
}

} // namespace

bool is_client_command(int argc, char** argv) {
  if (argc < 2) return false;
  std::string_view word = argv[1];
  return word == "status" || word == "ping" || word == "reload" || word == "scale";
}

int run_client_command(int argc, char** argv) {
  std::string what = argv[1];
  try {
    if (what == "reload" || what == "scale") return run_control_command(argc, argv);
    Options o = parse_options(argc, argv);
    if (o.help) {
      std::cout << (o.ping ? "Usage: fcgi-host ping --connect ADDR [--path PATH] [--timeout "
                             "SECONDS]\n"
                           : "Usage: fcgi-host status --connect ADDR [--path PATH] "
                             "[--json|--openmetrics|--prometheus|--html] [--full]\n"
                             "                        [--max-queue N] [--timeout SECONDS]\n")
                << "Asks a running fcgi-host over FastCGI (a health check) and prints the page.\n\n"
                << kClientCommandsHelp;
      return kClientHealthy;
    }
    HostReply r = ask(o.connect, {"GET", o.path, o.query, ""},
                      std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000)),
                      o.ping ? "ping" : "status");
    std::cout << r.body << std::flush;
    if (r.status != 200) throw Failure{kClientUnhealthy, "answered " + std::to_string(r.status)};
    if (o.max_queue >= 0 && r.idle == "0") {
      long queue = 0;
      std::from_chars(r.queue.data(), r.queue.data() + r.queue.size(), queue);
      if (queue > o.max_queue)
        throw Failure{kClientUnhealthy, "no idle worker and " + std::to_string(queue) +
                                            " connections waiting (--max-queue " +
                                            std::to_string(o.max_queue) + ")"};
    }
    return kClientHealthy;
  } catch (const Failure& f) {
    std::cerr << "fcgi-host " << what << ": " << f.why << "\n";
    return f.code;
  }
}

} // namespace fcgi_host
