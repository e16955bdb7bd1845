#pragma once
// Running the fcgi-host binary's client commands (status, ping, reload, scale) and reading what
// they print, for the integration tests.
#include "harness.hpp"

#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace it {

struct Command {
  int status = -1;
  std::string output;
};

// Runs a shell command (bounded by the command's own timeouts), with stderr in the output.
inline Command run_shell(const std::string& command) {
  Command c;
  std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return c;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    c.output.append(buf, n);
  int st = pclose(p);
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return c;
}

// The fcgi-host binary with `args` (a client command).
inline Command run_binary(const std::string& args) {
  return run_shell(HostProcess::binary() + " " + args);
}

// Parses OpenMetrics text with Debian's python3-prometheus-client and prints
// "family type samples" per family, then the value of `sample` (or "missing").
// `prometheus_text`: the Prometheus text format 0.0.4 parser instead of the OpenMetrics one.
inline std::string parse_openmetrics(const it::TempDir& dir, const std::string& text,
                                     const std::string& sample, bool prometheus_text = false) {
  std::string input = dir.write("metrics.txt", text);
  std::string script = dir.write("parse.py", std::string(prometheus_text ? R"(import sys
from prometheus_client.parser import text_string_to_metric_families)"
                                                                         : R"(import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families)") +
                                                 R"(
want = sys.argv[2]
found = "missing"
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    print(f.name, f.type, len(f.samples))
    for s in f.samples:
        labels = ",".join('%s="%s"' % kv for kv in sorted(s.labels.items()))
        key = s.name + ("{" + labels + "}" if labels else "")
        if key == want:
            found = "%g" % s.value
print("VALUE", found)
)");
  Command c = run_shell("/usr/bin/python3 " + script + " " + input + " '" + sample + "'");
  return c.output + (c.status == 0 ? "" : "\nEXIT " + std::to_string(c.status));
}

} // namespace it
