#include "fcgi_host/sandbox/sandbox_landlock.hpp"

#include "fcgi_host/sys_error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// Rights of later ABIs than the installed header knows.
constexpr unsigned long long kTruncate = 1ULL << 14; // ABI 3
constexpr unsigned long long kIoctlDev = 1ULL << 15; // ABI 5
// ABI 6: what a domain's processes may not reach outside it (LANDLOCK_SCOPE_*).
constexpr unsigned long long kScopeAbstractUnixSocket = 1ULL << 0;
constexpr unsigned long long kScopeSignal = 1ULL << 1;

// ABI 4: TCP rights, and the rule that grants them for one port.
constexpr unsigned long long kBindTcp = 1ULL << 0;
constexpr unsigned long long kConnectTcp = 1ULL << 1;
constexpr int kRuleNetPort = 2; // LANDLOCK_RULE_NET_PORT
struct [[gnu::packed]] NetPortAttr {
  unsigned long long allowed_access;
  unsigned long long port;
};

// struct landlock_ruleset_attr as ABI 6 has it (the installed header may stop at the files):
// the kernel reads as many fields as the size passed says, so an older kernel gets only the
// fields it knows.
struct RulesetAttr {
  unsigned long long handled_access_fs = 0;
  unsigned long long handled_access_net = 0; // ABI 4
  unsigned long long scoped = 0;             // ABI 6
};

// The size of RulesetAttr to pass to a kernel of ABI `abi`.
std::size_t ruleset_attr_size(int abi) {
  if (abi >= 6) return sizeof(RulesetAttr);
  if (abi >= 4) return offsetof(RulesetAttr, scoped);
  return offsetof(RulesetAttr, handled_access_net);
}

constexpr unsigned long long kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr unsigned long long kWrite =
    kRead | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
    LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM |
    LANDLOCK_ACCESS_FS_REFER | kTruncate | kIoctlDev;
// The rights that make sense on a file (a rule for a file with directory rights is refused).
constexpr unsigned long long kFileRights = LANDLOCK_ACCESS_FS_EXECUTE |
                                           LANDLOCK_ACCESS_FS_WRITE_FILE |
                                           LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

int probe_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) abi = 0;
  if (const char* cap = std::getenv("FCGI_HOST_TEST_LANDLOCK_ABI"))
    abi = std::min(abi, std::strtol(cap, nullptr, 10));
  return static_cast<int>(abi);
}

// Adds `rule` to `rules`, or widens the rule already there for its path.
void add(std::vector<LandlockRule>& rules, LandlockRule rule) {
  auto same = std::find_if(rules.begin(), rules.end(),
                           [&](const LandlockRule& r) { return r.path == rule.path; });
  if (same == rules.end()) {
    rules.push_back(std::move(rule));
    return;
  }
  same->write = same->write || rule.write;
  same->execute = same->execute || rule.execute;
  same->required = same->required || rule.required;
}

} // namespace

const std::vector<std::string_view> kSystemReads = {
    // TLS: the certificate stores OpenSSL and GnuTLS read.
    "/etc/ssl", "/etc/ca-certificates", "/usr/share/ca-certificates", "/usr/lib/ssl",
    // Name resolution (getaddrinfo) and service names.
    "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
    "/etc/services", "/etc/protocols",
    // Time zones and locales.
    "/etc/localtime", "/etc/timezone", "/usr/share/zoneinfo", "/usr/lib/locale",
    "/usr/share/locale", "/etc/ld.so.cache",
    // Random numbers, and the CPU count glibc's sysconf reads.
    "/dev/urandom", "/dev/random", "/sys/devices/system/cpu",
    // The worker's own /proc directory (/proc/self resolves to it when the rule is made).
    "/proc/self"};

const std::vector<std::string_view> kExecProgramReads = {"/usr", "/bin", "/lib", "/lib64",
                                                         "/etc/ld.so.cache"};

std::vector<std::string> mapped_files(std::string_view maps) {
  std::vector<std::string> files;
  while (!maps.empty()) {
    std::size_t eol = maps.find('\n');
    std::string_view line = maps.substr(0, eol);
    maps = eol == std::string_view::npos ? std::string_view{} : maps.substr(eol + 1);
    // "start-end perms offset dev inode   path": the path is what follows the 5th field.
    std::size_t at = line.find('/');
    if (at == std::string_view::npos) continue;
    std::string_view path = line.substr(at);
    if (path.ends_with(" (deleted)")) continue;
    if (std::find(files.begin(), files.end(), path) == files.end()) files.emplace_back(path);
  }
  return files;
}

std::vector<LandlockRule> landlock_rules(const SandboxSettings& settings,
                                         const std::vector<std::string>& mapped,
                                         const std::vector<std::string>& programs) {
  std::vector<LandlockRule> rules;
  for (const std::string& f : mapped)
    add(rules, {f, false, false, false});
  for (std::string_view p : kSystemReads)
    add(rules, {std::string(p), false, false, false});
  // /dev/null is written to (the handler's stray output, a child's stdin).
  add(rules, {"/dev/null", true, false, false});
  if (!programs.empty() || settings.allow_exec)
    for (std::string_view p : kExecProgramReads)
      add(rules, {std::string(p), false, true, false});
  for (const std::string& p : programs)
    add(rules, {p, false, true, true});
  for (const std::string& p : settings.read)
    add(rules, {p, false, settings.allow_exec, true});
  for (const std::string& p : settings.write)
    add(rules, {p, true, settings.allow_exec, true});
  for (const std::string& p : settings.host_write)
    add(rules, {p, true, false, true});
  // --private-tmp: the pool's own /tmp is the worker's to write.
  if (settings.private_tmp) add(rules, {"/tmp", true, false, true});
  return rules;
}

int landlock_abi() {
  static const int abi = probe_abi();
  return abi;
}

unsigned long long landlock_handled_net(int abi) {
  return abi >= 4 ? kBindTcp | kConnectTcp : 0;
}

unsigned long long landlock_scopes(int abi) {
  return abi >= 6 ? kScopeSignal | kScopeAbstractUnixSocket : 0;
}

unsigned long long landlock_handled_access(int abi) {
  if (abi < 1) return 0;
  unsigned long long handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; // ABI 1: bits 0..12
  if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) handled |= kTruncate;
  if (abi >= 5) handled |= kIoctlDev;
  return handled;
}

std::string apply_landlock(const std::vector<LandlockRule>& rules, const LandlockPorts& ports,
                           int abi) {
  const unsigned long long handled = landlock_handled_access(abi);
  RulesetAttr attr;
  attr.handled_access_fs = handled;
  attr.handled_access_net = landlock_handled_net(abi);
  attr.scoped = landlock_scopes(abi);
  int ruleset =
      static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, ruleset_attr_size(abi), 0));
  if (ruleset < 0) return sys_error("landlock_create_ruleset", "sandbox");
  std::string error;
  for (const LandlockRule& r : rules) {
    int fd = ::open(r.path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (!r.required) continue;
      error = sys_error("open", r.path);
      break;
    }
    struct stat st {};
    unsigned long long allowed = r.write ? kWrite : kRead;
    if (r.execute) allowed |= LANDLOCK_ACCESS_FS_EXECUTE;
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) allowed &= kFileRights;
    landlock_path_beneath_attr beneath{};
    beneath.allowed_access = allowed & handled;
    beneath.parent_fd = fd;
    long rc = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    int err = errno;
    ::close(fd);
    if (rc != 0) {
      error = sys_error("landlock_add_rule", r.path, err);
      break;
    }
  }
  // The TCP ports listed; every other bind and connect is refused (EACCES).
  auto add_port = [&](std::uint16_t port, unsigned long long access, const char* what) {
    if (!error.empty() || attr.handled_access_net == 0) return;
    NetPortAttr rule{access, port};
    if (::syscall(SYS_landlock_add_rule, ruleset, kRuleNetPort, &rule, 0) != 0)
      error = sys_error("landlock_add_rule", std::string(what) + " port " + std::to_string(port));
  };
  for (std::uint16_t port : ports.connect)
    add_port(port, kConnectTcp, "--sandbox-connect");
  for (std::uint16_t port : ports.bind)
    add_port(port, kBindTcp, "--sandbox-bind");
  if (error.empty() && ::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
    error = sys_error("landlock_restrict_self", "sandbox");
  ::close(ruleset);
  return error;
}

} // namespace fcgi_host
