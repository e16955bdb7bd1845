// The sandbox's pure parts: the Landlock rules a worker gets (mapped files, the system list,
// the options' lists), the rights each ABI handles, the seccomp deny-list and its filter, and
// the options that describe it.
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/cli/start_checks.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sandbox/sandbox_landlock.hpp"
#include "fcgi_host/sandbox/sandbox_seccomp.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <vector>

using namespace fcgi_host;

namespace {

Config parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fcgi-host");
  std::vector<const char*> argv;
  for (auto& a : args)
    argv.push_back(a.c_str());
  Config c;
  std::ostringstream out;
  parse_config(static_cast<int>(argv.size()), argv.data(), c, out);
  return c;
}

// The start checks' refusal of a well-formed config, "" when it passes.
std::string start_refusal(std::vector<std::string> args) {
  try {
    check_before_start(parse(std::move(args)));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const LandlockRule* rule_for(const std::vector<LandlockRule>& rules, const std::string& path) {
  auto it = std::find_if(rules.begin(), rules.end(),
                         [&](const LandlockRule& r) { return r.path == path; });
  return it == rules.end() ? nullptr : &*it;
}

bool denies(const std::vector<SeccompDenial>& list, std::string_view name) {
  return std::any_of(list.begin(), list.end(),
                     [&](const SeccompDenial& d) { return d.name == name; });
}

// The verdict of a classic BPF seccomp program for one call, and how many instructions it ran:
// the few operations libseccomp emits, run as the kernel would (an unknown one fails the test).
struct FilterVerdict {
  std::uint32_t action = 0;
  int steps = 0;
};
FilterVerdict run_filter(const std::vector<unsigned char>& bpf, int nr, std::uint64_t arg0 = 0,
                         std::uint64_t arg1 = 0) {
  std::vector<sock_filter> prog(bpf.size() / sizeof(sock_filter));
  std::memcpy(prog.data(), bpf.data(), prog.size() * sizeof(sock_filter));
  seccomp_data data{};
  data.nr = nr;
  data.arch = AUDIT_ARCH_X86_64;
  data.args[0] = arg0;
  data.args[1] = arg1;
  std::uint32_t a = 0;
  FilterVerdict v;
  for (std::size_t pc = 0; pc < prog.size() && v.steps < 1000; ++v.steps) {
    const sock_filter& i = prog[pc];
    auto jump = [&](bool taken) { pc += 1 + (taken ? i.jt : i.jf); };
    switch (i.code) {
    case BPF_LD | BPF_W | BPF_ABS:
      REQUIRE(i.k + 4 <= sizeof data);
      std::memcpy(&a, reinterpret_cast<const char*>(&data) + i.k, 4);
      ++pc;
      break;
    case BPF_JMP | BPF_JEQ | BPF_K:
      jump(a == i.k);
      break;
    case BPF_JMP | BPF_JGT | BPF_K:
      jump(a > i.k);
      break;
    case BPF_JMP | BPF_JGE | BPF_K:
      jump(a >= i.k);
      break;
    case BPF_JMP | BPF_JSET | BPF_K:
      jump((a & i.k) != 0);
      break;
    case BPF_JMP | BPF_JA:
      pc += 1 + i.k;
      break;
    case BPF_ALU | BPF_AND | BPF_K:
      a &= i.k;
      ++pc;
      break;
    case BPF_RET | BPF_K:
      v.action = i.k;
      ++v.steps;
      return v;
    default:
      FAIL("BPF operation " << i.code << " not known to the test");
      return v;
    }
  }
  FAIL("the program ran off its end");
  return v;
}

} // namespace

TEST_SUITE("sandbox") {
  TEST_CASE("mapped_files: each file once, without pseudo and deleted mappings") {
    const std::string maps =
        "55d0-55d1 r--p 00000000 08:01 123  /usr/bin/fcgi-host\n"
        "55d1-55d2 r-xp 00001000 08:01 123  /usr/bin/fcgi-host\n"
        "7f00-7f01 r--p 00000000 08:01 456  /srv/app/lib app.so\n"
        "7f01-7f02 rw-p 00000000 00:00 0 \n"
        "7f02-7f03 rw-p 00000000 00:00 0    [heap]\n"
        "7f03-7f04 rw-s 00000000 00:01 789  /dev/zero (deleted)\n"
        "7f04-7f05 r--p 00000000 08:01 999  /usr/lib/x86_64-linux-gnu/libc.so.6";
    CHECK(mapped_files(maps) == std::vector<std::string>{"/usr/bin/fcgi-host",
                                                         "/srv/app/lib app.so",
                                                         "/usr/lib/x86_64-linux-gnu/libc.so.6"});
    CHECK(mapped_files("").empty());
  }

  TEST_CASE("landlock_rules: mapped files and the system list read-only, the lists as given") {
    SandboxSettings s;
    s.mode = SandboxMode::On;
    s.read = {"/srv/app/conf"};
    s.write = {"/srv/app/data", "/srv/app/conf"}; // the same path twice: its widest access
    s.host_write = {"/var/log/fcgi-host.log"};
    auto rules = landlock_rules(s, {"/srv/app/libapp.so"}, {});
    REQUIRE(rule_for(rules, "/srv/app/libapp.so"));
    CHECK_FALSE(rule_for(rules, "/srv/app/libapp.so")->write);
    CHECK_FALSE(rule_for(rules, "/srv/app/libapp.so")->required); // mapped: may be gone
    for (const char* system :
         {"/etc/ssl", "/etc/resolv.conf", "/usr/share/zoneinfo", "/dev/urandom", "/proc/self"}) {
      REQUIRE(rule_for(rules, system));
      CHECK_FALSE(rule_for(rules, system)->write);
      CHECK_FALSE(rule_for(rules, system)->required);
    }
    CHECK(rule_for(rules, "/dev/null")->write);
    CHECK(rule_for(rules, "/srv/app/data")->write);
    CHECK(rule_for(rules, "/srv/app/data")->required);
    CHECK(rule_for(rules, "/srv/app/conf")->write);
    CHECK(std::count_if(rules.begin(), rules.end(),
                        [](const LandlockRule& r) { return r.path == "/srv/app/conf"; }) == 1);
    CHECK(rule_for(rules, "/var/log/fcgi-host.log")->write);
    // Nothing executable, no /tmp, no /usr beyond the listed files, no /etc at large.
    CHECK(
        std::none_of(rules.begin(), rules.end(), [](const LandlockRule& r) { return r.execute; }));
    CHECK_FALSE(rule_for(rules, "/tmp"));
    CHECK_FALSE(rule_for(rules, "/usr"));
    CHECK_FALSE(rule_for(rules, "/etc"));
  }

  TEST_CASE("landlock_rules: an exec'd program, --sandbox-exec, --private-tmp") {
    SandboxSettings s;
    s.mode = SandboxMode::On;
    s.read = {"/srv/site"};
    auto exec_rules = landlock_rules(s, {}, {"/usr/bin/php-cgi"});
    CHECK(rule_for(exec_rules, "/usr/bin/php-cgi")->execute);
    CHECK(rule_for(exec_rules, "/usr")->execute);
    CHECK_FALSE(rule_for(exec_rules, "/usr")->write);
    CHECK_FALSE(rule_for(exec_rules, "/srv/site")->execute); // scripts are read, not executed
    s.allow_exec = true;
    auto handler_exec = landlock_rules(s, {}, {});
    CHECK(rule_for(handler_exec, "/usr")->execute);
    CHECK(rule_for(handler_exec, "/srv/site")->execute);
    s.private_tmp = true;
    CHECK(rule_for(landlock_rules(s, {}, {}), "/tmp")->write);
  }

  TEST_CASE("landlock_handled_access: each ABI handles its rights, none without Landlock") {
    CHECK(landlock_handled_access(0) == 0);
    CHECK(landlock_handled_access(1) == 0x1fffULL);
    CHECK(landlock_handled_access(2) == 0x3fffULL); // + refer
    CHECK(landlock_handled_access(3) == 0x7fffULL); // + truncate
    CHECK(landlock_handled_access(4) == 0x7fffULL); // (network rights: landlock_handled_net)
    CHECK(landlock_handled_access(7) == 0xffffULL); // + ioctl on devices
    CHECK(landlock_handled_net(3) == 0);
    CHECK(landlock_handled_net(4) == 3); // bind and connect TCP
    CHECK(landlock_scopes(5) == 0);
    CHECK(landlock_scopes(6) == 3); // abstract Unix sockets and signals
  }

  TEST_CASE("seccomp_denials: the web handler's never-needed calls, exec unless allowed") {
    auto strict = seccomp_denials(false);
    for (const char* call : {"ptrace",
                             "process_vm_readv",
                             "process_vm_writev",
                             "mount",
                             "umount2",
                             "pivot_root",
                             "chroot",
                             "unshare",
                             "setns",
                             "init_module",
                             "finit_module",
                             "kexec_load",
                             "bpf",
                             "perf_event_open",
                             "keyctl",
                             "add_key",
                             "request_key",
                             "userfaultfd",
                             "reboot",
                             "swapon",
                             "acct",
                             "execve",
                             "execveat",
                             "prlimit64",
                             "setpriority",
                             "chmod",
                             "fchmod",
                             "fchmodat",
                             "fchmodat2",
                             "fchownat",
                             "utimensat",
                             "setxattr",
                             "fremovexattr",
                             "inotify_add_watch",
                             "memfd_create"})
      CHECK_MESSAGE(denies(strict, call), call);
    auto with_exec = seccomp_denials(true);
    CHECK_FALSE(denies(with_exec, "execve"));
    CHECK_FALSE(denies(with_exec, "execveat"));
    CHECK_FALSE(denies(with_exec, "memfd_create"));
    CHECK(denies(with_exec, "fchmod"));
    CHECK(denies(with_exec, "ptrace"));
    for (const char* call :
         {"read", "write", "sendto", "epoll_wait", "openat", "socket", "connect", "kill", "prctl"})
      CHECK_FALSE(denies(strict, call));
  }

  TEST_CASE("build_seccomp_filter: a BPF program, longer with exec refused, log mode too") {
    std::vector<unsigned char> strict, with_exec, logging;
    CHECK(build_seccomp_filter(seccomp_denials(false), false, strict) == "");
    CHECK(build_seccomp_filter(seccomp_denials(true), false, with_exec) == "");
    CHECK(build_seccomp_filter(seccomp_denials(false), true, logging) == "");
    CHECK(strict.size() % 8 == 0); // struct sock_filter instructions
    CHECK(strict.size() > with_exec.size());
    CHECK_FALSE(logging.empty());
    CHECK(logging != strict); // SECCOMP_RET_LOG instead of SECCOMP_RET_ERRNO
  }

  TEST_CASE("the filter's verdicts: listed calls EPERM, clone with a namespace flag refused, "
            "the hot calls allowed in a few steps (a tree, not a list)") {
#if defined(__x86_64__)
    std::vector<unsigned char> bpf;
    REQUIRE(build_seccomp_filter(seccomp_denials(false), false, bpf) == "");
    const std::uint32_t eperm = SECCOMP_RET_ERRNO | 1;
    for (int nr : {SYS_ptrace, SYS_mount, SYS_unshare, SYS_bpf, SYS_execve, SYS_keyctl})
      CHECK_MESSAGE(run_filter(bpf, nr).action == eperm, "call " << nr);
    CHECK(run_filter(bpf, SYS_clone3).action == (SECCOMP_RET_ERRNO | ENOSYS));
    CHECK(run_filter(bpf, SYS_clone, CLONE_NEWUSER).action == eperm);
    CHECK(run_filter(bpf, SYS_clone, CLONE_VM | CLONE_THREAD).action == SECCOMP_RET_ALLOW);
    // Limits and priority: this process's (0) only; another pid, a group or a user refused.
    CHECK(run_filter(bpf, SYS_prlimit64, 0).action == SECCOMP_RET_ALLOW);
    CHECK(run_filter(bpf, SYS_prlimit64, 4242).action == eperm);
    CHECK(run_filter(bpf, SYS_setpriority, PRIO_PROCESS, 0).action == SECCOMP_RET_ALLOW);
    CHECK(run_filter(bpf, SYS_setpriority, PRIO_PROCESS, 4242).action == eperm);
    CHECK(run_filter(bpf, SYS_setpriority, PRIO_PGRP, 0).action == eperm);
    CHECK(run_filter(bpf, SYS_setpriority, PRIO_USER, 0).action == eperm);
    // Metadata and memfd, and fchmodat2 by its number (libseccomp 2.5 does not know its name).
    for (int nr : {SYS_chmod, SYS_fchmod, SYS_fchownat, SYS_utimensat, SYS_fsetxattr,
                   SYS_inotify_add_watch, SYS_memfd_create, 452})
      CHECK_MESSAGE(run_filter(bpf, nr).action == eperm, "call " << nr);
    int most = 0;
    for (int nr : {SYS_read, SYS_write, SYS_sendto, SYS_recvfrom, SYS_epoll_wait, SYS_accept4,
                   SYS_openat, SYS_close, SYS_getppid}) {
      FilterVerdict v = run_filter(bpf, nr);
      CHECK_MESSAGE(v.action == SECCOMP_RET_ALLOW, "call " << nr);
      most = std::max(most, v.steps);
    }
    // A list would compare each of the ~35 listed calls in turn.
    CHECK(most <= 16);
    std::vector<unsigned char> logging;
    REQUIRE(build_seccomp_filter(seccomp_denials(false), true, logging) == "");
    CHECK(run_filter(logging, SYS_ptrace).action == SECCOMP_RET_LOG);
#else
    MESSAGE("SKIPPED: the test's BPF run assumes x86-64 call numbers");
#endif
  }

  TEST_CASE("options: modes, lists, and what needs --sandbox or --exec") {
    Config c = parse({"--sandbox", "on", "--sandbox-read", "/srv/a", "--sandbox-read", "/srv/b",
                      "--sandbox-write", "/srv/w", "--private-tmp", "on", "--error-log",
                      "/var/log/x.log"});
    SandboxSettings s = sandbox_settings(c);
    CHECK(s.mode == SandboxMode::On);
    CHECK(s.read == std::vector<std::string>{"/srv/a", "/srv/b"});
    CHECK(s.write == std::vector<std::string>{"/srv/w"});
    CHECK(s.private_tmp);
    CHECK_FALSE(s.allow_exec);
    CHECK(s.host_write == std::vector<std::string>{"/var/log/x.log"});
    CHECK(sandbox_settings(parse({"--sandbox", "best-effort"})).mode == SandboxMode::BestEffort);
    CHECK(sandbox_settings(parse({"--sandbox", "log"})).mode == SandboxMode::Log);
    CHECK(sandbox_settings(parse({})).mode == SandboxMode::Off);
    Config php = parse({"--sandbox", "on", "--script-root", "/srv/site", "--exec", "php-cgi"});
    CHECK(sandbox_settings(php).read == std::vector<std::string>{"/srv/site"});

    Config net = parse({"--sandbox", "on", "--sandbox-connect", "db.internal:5432",
                        "--sandbox-connect", "[::1]:6379", "--sandbox-bind", "8125"});
    CHECK(sandbox_settings(net).connect_ports == std::vector<std::uint16_t>{5432, 6379});
    CHECK(sandbox_settings(net).bind_ports == std::vector<std::uint16_t>{8125});
    CHECK(sandbox_settings(parse({"--sandbox", "on"})).connect_ports.empty());
    CHECK(error_of({"--sandbox", "on", "--sandbox-connect", "db.internal"}) ==
          "--sandbox-connect: 'db.internal' is not HOST:PORT");
    CHECK(error_of({"--sandbox", "on", "--sandbox-connect", "db:70000"}) ==
          "--sandbox-connect: '70000' is not a TCP port (1 to 65535)");
    CHECK(error_of({"--sandbox", "on", "--sandbox-bind", "http"}) ==
          "--sandbox-bind: 'http' is not a TCP port (1 to 65535)");
    CHECK(error_of({"--sandbox-connect", "db:5432"}) ==
          "--sandbox-connect: has no effect without --sandbox");

    CHECK(error_of({"--sandbox", "yes"}) ==
          "--sandbox: 'yes' is not one of on, off, best-effort, log");
    CHECK(error_of({"--sandbox-read", "/srv"}) ==
          "--sandbox-read: has no effect without --sandbox");
    CHECK(error_of({"--sandbox", "on", "--sandbox-write", "data"}) ==
          "--sandbox-write: \"data\" is not an absolute path");
    CHECK(error_of({"--sandbox", "on", "--sandbox-exec", "maybe"}) ==
          "--sandbox-exec: must be on or off");
    CHECK(error_of({"--sandbox", "on", "--script-root", "/srv"})
              .starts_with("--script-root: is for --exec programs"));
    CHECK(error_of({"--script-extensions", ".php"})
              .starts_with("--script-extensions: is for --exec programs"));
    CHECK(error_of({"--script-extensions", "php", "--exec", "php-cgi"}) ==
          "--script-extensions: \"php\" is not a suffix such as .php");
    // The host's script check needs no --sandbox.
    Config gate = parse(
        {"--script-root", "/srv/site", "--script-extensions", ".php .phar", "--exec", "php-cgi"});
    CHECK(gate.script_root == "/srv/site");
    CHECK(gate.script_extensions == std::vector<std::string>{".php", ".phar"});
    CHECK(sandbox_line(gate) == "off; scripts under /srv/site, .php .phar (404 by the host)");
    CHECK(sandbox_line(parse({"--script-extensions", ".php", "--exec", "php-cgi"})) ==
          "off; scripts .php (404 by the host)");
    CHECK(sandbox_line(parse({})) == "off");
  }

  TEST_CASE("describe_sandbox: one line of what applies") {
    SandboxSettings s;
    CHECK(describe_sandbox(s) == "off");
    s.private_tmp = true;
    CHECK(describe_sandbox(s) == "off (private /tmp)");
    s.mode = SandboxMode::On;
    s.read = {"/a"};
    std::string on = describe_sandbox(s);
    CHECK(on.starts_with("on: landlock "));
    CHECK(on.find("seccomp deny-list (exec refused)") != std::string::npos);
    CHECK(on.find("private /tmp; read 1, write 0 paths; TCP ") != std::string::npos);
    s.connect_ports = {5432};
    const std::string tcp = describe_sandbox(s);
    if (landlock_handled_net(landlock_abi()) != 0)
      CHECK(tcp.ends_with("; TCP connect to port 5432, bind none"));
    else
      CHECK(tcp.ends_with("; TCP open (Landlock ABI < 4)"));
    s.mode = SandboxMode::Log;
    CHECK(describe_sandbox(s).find("(exec logged)") != std::string::npos);
  }

  TEST_CASE("start checks: the lists' paths exist, --script-root is a directory") {
    const std::vector<std::string> at = {"--listen", "127.0.0.1:9", "--sandbox", "best-effort"};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), at.begin(), at.end());
      return more;
    };
    CHECK(start_refusal(with({"--sandbox-read", "/etc/hostname"})) == "");
    CHECK(start_refusal(with({"--sandbox-read", "/nonexistent/conf"})) ==
          "--sandbox-read: \"/nonexistent/conf\": No such file or directory");
    CHECK(start_refusal(with({"--sandbox-write", "/nonexistent/data"})) ==
          "--sandbox-write: \"/nonexistent/data\": No such file or directory");
    CHECK(start_refusal(with({"--script-root", "/etc/hostname", "--exec", "/bin/true"})) ==
          "--script-root: \"/etc/hostname\" is not a directory");
    CHECK(start_refusal(with({"--script-root", "/nonexistent", "--exec", "/bin/true"})) ==
          "--script-root: \"/nonexistent\": No such file or directory");
    // Without --sandbox too: the host's script check needs its root.
    CHECK(start_refusal({"--listen", "127.0.0.1:9", "--script-root", "/nonexistent", "--exec",
                         "/bin/true"}) ==
          "--script-root: \"/nonexistent\": No such file or directory");
  }
}
