#include "fcgi_host/cli/replay_command.hpp"

#include "fcgi_host/cli/app_source.hpp"
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/net/connect.hpp"
#include "fcgi_host/protocol/capture_file.hpp"
#include "fcgi_host/protocol/client_exchange.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/argv.hpp"
#include "process_manager/log.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <poll.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace fcgi_host {
namespace {

constexpr int kAnswered = 0;
constexpr int kNoAnswer = 1;
constexpr int kUsage = 2;
constexpr auto kConnectBudget = std::chrono::seconds(5);

constexpr const char* kUsageText =
    "Usage: fcgi-host replay FILE [--set-param NAME=VALUE]... [OPTIONS]\n"
    "Runs a request that --capture-crashes kept through the handler of --app in this one\n"
    "process (no fork: under gdb --args it stops where the worker crashed), and prints the\n"
    "response on stdout. OPTIONS are fcgi-host's own: --app, --config FILE --pool NAME, the\n"
    "limits; those only a master uses are ignored.\n"
    "  --set-param NAME=VALUE  give the param NAME this value (a redacted cookie, say)\n"
    "Exit 0: answered; 1: no answer (the handler could not start); 2: usage, or a file that\n"
    "is not a whole capture; a crash ends it as it ended the worker.\n";

struct ReplayFailure {
  int code;
  std::string why;
};

struct ReplayArgs {
  std::string file;
  std::vector<std::pair<std::string, std::string>> set_params;
  std::vector<std::string> host_args{"fcgi-host"};
  bool help = false;
};

void add_set_param(ReplayArgs& a, const std::string& text) {
  std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ReplayFailure{kUsage, "--set-param: '" + text + "' is not NAME=VALUE"};
  a.set_params.emplace_back(text.substr(0, eq), text.substr(eq + 1));
}

ReplayArgs split_args(int argc, char** argv) {
  ReplayArgs a;
  for (int i = 2; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--help" || word == "-h") {
      a.help = true;
    } else if (word == "--set-param") {
      if (++i == argc) throw ReplayFailure{kUsage, "--set-param: needs NAME=VALUE"};
      add_set_param(a, argv[i]);
    } else if (word.starts_with("--set-param=")) {
      add_set_param(a, word.substr(12));
    } else if (i == 2 && !word.starts_with("-")) {
      a.file = word;
    } else {
      a.host_args.push_back(word);
    }
  }
  if (a.file.empty() && !a.help)
    throw ReplayFailure{kUsage, "name the capture file first: fcgi-host replay FILE [OPTIONS]"};
  return a;
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReplayFailure{kUsage, "cannot read \"" + path + "\": " + std::strerror(errno)};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The capture, with --set-param applied and CONTENT_LENGTH matched to the body it kept.
capture::CapturedRequest load_request(const ReplayArgs& a) {
  capture::CapturedRequest r;
  try {
    r = capture::read_capture(read_whole_file(a.file));
  } catch (const capture::FileError& e) {
    throw ReplayFailure{kUsage, a.file + ": " + e.what()};
  }
  for (const auto& [name, value] : a.set_params)
    r.set_param(name, value);
  std::string length = r.param("CONTENT_LENGTH"), kept = std::to_string(r.body.size());
  if (!length.empty() && length != kept) {
    std::cerr << "fcgi-host replay: CONTENT_LENGTH " << process_manager::log_escaped(length)
              << " becomes " << kept << ": the capture kept " << kept << " bytes of the body ("
              << process_manager::log_escaped(r.field("body")) << ")\n";
    r.set_param("CONTENT_LENGTH", kept);
  }
  return r;
}

// The pool's worker settings, but for what belongs to a worker process of a master: this
// process keeps its user (a production config names one a laptop may not have, or may not
// change to), and keeps no capture of its own.
WorkerSettings replay_settings(Config config) {
  config.user.clear();
  config.group.clear();
  config.capture_dir.clear();
  WorkerSettings s = worker_settings(config, WorkerPlumbing{});
  // Not even the default user of a master started as root (nobody): this process is the
  // worker, and the client that asks it. Changed to nobody, it could no longer connect to its
  // own socket (root's, 0600) once the worker side had switched.
  s.credentials = Credentials{};
  s.close_listen_fd_on_stop = false; // the in-process host's own socket
  return s;
}

// What a captured request or its answer shows on a terminal: the capture holds a client's bytes,
// and an escape sequence must not reach the terminal as one. Control bytes but newline and tab
// are written \xNN (the log's rule, process_manager/log.hpp); to a file or a pipe, the bytes as
// they are.
void write_out(std::ostream& out, int fd, std::string_view bytes) {
  if (!::isatty(fd)) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return;
  }
  std::string shown;
  for (std::size_t at = 0; at < bytes.size();) {
    std::size_t end = bytes.find_first_of("\n\t", at);
    if (end == std::string_view::npos) end = bytes.size();
    process_manager::append_log_escaped(shown, bytes.substr(at, end - at));
    if (end < bytes.size()) shown.push_back(bytes[end]);
    at = end + 1;
  }
  out << shown;
}

// Sends the request and copies the answer's STDOUT to stdout, STDERR to stderr.
int ask_replay_host(const InProcessHost& host, const std::string& request) {
  std::string why;
  ConnectTarget target{true, host.address().substr(5), ""}; // "unix:PATH"
  int fd = connect_before(target, SteadyClock::now() + kConnectBudget, why);
  if (fd < 0) throw ReplayFailure{kNoAnswer, why};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // A replay may be stepped through in a debugger: no deadline but a day's, and the wait ends
  // early only when the worker gave up.
  try {
    exchange(
        fd, host.address(), request, SteadyClock::now() + std::chrono::hours(24),
        [](const records::RecordView& r) {
          if (r.header.is(records::Type::Stdout)) write_out(std::cout, 1, r.content);
          if (r.header.is(records::Type::Stderr)) write_out(std::cerr, 2, r.content);
          std::cout.flush();
        },
        [&host](std::string& why) {
          why = "the worker did not start (its log line above says why)";
          return !host.worker_ended();
        });
  } catch (const ExchangeError& e) {
    throw ReplayFailure{kNoAnswer, e.what()};
  }
  return kAnswered;
}

int replay(const ReplayArgs& a, app::Handler* own) {
  capture::CapturedRequest request = load_request(a);
  Config config;
  process_manager::Argv argv(a.host_args);
  if (parse_config(argv.argc(), argv.cdata(), config, std::cout) == ParseOutcome::Exit)
    return kAnswered;
  if (!config.exec.empty())
    throw ReplayFailure{kUsage, "--exec: a replay runs a handler in this process; send the file's "
                                "records to the program's socket instead"};
  AppSource app = resolve_app(config, own, current_directory());
  // The handler runs as the workers' user (nobody for root: replay_settings()), so it loads a
  // private copy of the plugin, as a host's workers do: a plugin in a directory that user cannot
  // enter (a checkout in /root or a mkdtemp() directory) replays too.
  std::shared_ptr<PluginDirectory> plugins;
  if (!app.plugin.empty()) {
    Config workers = config;
    workers.user.clear();
    workers.group.clear();
    plugins = plugin_directory(workers, nullptr);
    copy_and_check_plugin(app, workers, plugins);
  }
  if (!config.chdir.empty() && ::chdir(config.chdir.c_str()) != 0)
    throw ReplayFailure{kUsage, config.where("chdir") + ": " + sys_error("chdir", config.chdir)};
  // The capture's words, always escaped: this line is read by a person, never parsed.
  using process_manager::log_escaped;
  std::cerr << "fcgi-host replay: " << log_escaped(request.param("REQUEST_METHOD")) << " "
            << log_escaped(request.param("REQUEST_URI")) << " (captured "
            << log_escaped(request.field("time")) << " from worker "
            << log_escaped(request.field("pid")) << ", signal "
            << log_escaped(request.field("signal"))
            << "; redacted: " << log_escaped(request.field("redacted")) << ")\n";
  InProcessHost host(replay_settings(config), app.factory());
  return ask_replay_host(host, capture::encode_request(request));
}

} // namespace

bool is_replay_command(int argc, char** argv) {
  return argc >= 2 && std::string_view(argv[1]) == "replay";
}

int run_replay_command(int argc, char** argv, app::Handler* own) {
  try {
    ReplayArgs a = split_args(argc, argv);
    if (a.help) {
      std::cout << kUsageText;
      return kAnswered;
    }
    return replay(a, own);
  } catch (const ReplayFailure& f) {
    std::cerr << "fcgi-host replay: " << f.why << "\n";
    return f.code;
  } catch (const ConfigError& e) {
    std::cerr << "fcgi-host replay: " << e.what() << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "fcgi-host replay: " << e.what() << "\n";
    return kNoAnswer;
  }
}

} // namespace fcgi_host
