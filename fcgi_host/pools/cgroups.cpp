#include "fcgi_host/pools/cgroups.hpp"

#include "fcgi_host/config/exec_env.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/cgroup_v2.hpp"
#include "process_manager/log.hpp"
#include "process_manager/proc_children.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

namespace cg = process_manager;
using process_manager::LogLevel;

constexpr const char* kSupervisorLeaf = "supervisor";
constexpr const char* kDelegateHint = "; run under systemd with Delegate=yes";

// The controllers a pool's options need: memory-max -> memory, cpu-weight -> cpu.
std::set<std::string> controllers_for(const PoolSpec& c) {
  std::set<std::string> out;
  if (c.memory_max) out.insert("memory");
  if (c.cpu_weight) out.insert("cpu");
  return out;
}

const char* option_for(const std::string& controller) {
  return controller == "memory" ? "memory-max" : "cpu-weight";
}

// Writes `text` to a cgroup file in one write(), as the kernel wants; errno on false.
bool write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  ::close(fd);
  errno = err;
  return ok;
}

void write_or_throw(const std::string& path, const std::string& text) {
  if (!write_file(path, text)) throw StartupError(sys_error("write", path + "\", \"" + text));
}

void make_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw StartupError(sys_error("mkdir", dir));
}

// This process, or the master of the pools whose new binary's --test-config it is at USR2.
pid_t service_root() {
  const char* master = std::getenv(exec_env::kCheckedFor);
  return master ? static_cast<pid_t>(std::atol(master)) : ::getpid();
}

// `pid` is the service root or one of its descendants.
bool is_own(pid_t pid) {
  const pid_t root = service_root();
  for (int depth = 0; pid > 1 && depth < 64; ++depth, pid = process_manager::parent_of(pid))
    if (pid == root || pid == ::getpid()) return true;
  return false;
}

std::string foreign_process(const std::string& dir, const std::set<std::string>& need);

// Why `dir` cannot carry the limits of pool `c`, or empty; `option` is set to the one to name.
std::string unusable(const std::string& dir, const PoolSpec& c, std::string& option) {
  const std::set<std::string> need = controllers_for(c);
  option = option_for(*need.begin());
  const std::optional<std::string> text = cg::read_text_file(dir + "/cgroup.controllers");
  if (!text) return "cannot read " + dir + "/cgroup.controllers (not a cgroup v2 directory)";
  const std::vector<std::string> have = cg::split_words(*text);
  for (const std::string& controller : need)
    if (std::find(have.begin(), have.end(), controller) == have.end()) {
      option = option_for(controller);
      return "the " + controller + " controller is not available in " + dir +
             " (its cgroup.controllers: " +
             (have.empty() ? "none" : text->substr(0, text->find('\n'))) + ")";
    }
  for (const char* file : {"", "/cgroup.procs", "/cgroup.subtree_control"})
    if (::access((dir + file).c_str(), W_OK) != 0)
      return sys_error("access", dir + file) + " (the cgroup is not delegated to uid " +
             std::to_string(::geteuid()) + ")";
  return foreign_process(dir, need);
}

// cgroup v2 enables a controller for a cgroup's children only once every process of it is in
// them (the root cgroup is exempt: it alone has no cgroup.type); ours move, others would not.
std::string foreign_process(const std::string& dir, const std::set<std::string>& need) {
  const std::vector<std::string> enabled =
      cg::split_words(cg::read_text_file(dir + "/cgroup.subtree_control").value_or(""));
  if (std::all_of(need.begin(), need.end(),
                  [&](const std::string& c) {
                    return std::find(enabled.begin(), enabled.end(), c) != enabled.end();
                  }) ||
      ::access((dir + "/cgroup.type").c_str(), F_OK) != 0)
    return "";
  for (const std::string& word :
       cg::split_words(cg::read_text_file(dir + "/cgroup.procs").value_or(""))) {
    const pid_t pid = static_cast<pid_t>(std::atoi(word.c_str()));
    if (pid <= 0 || is_own(pid)) continue;
    const std::string comm = cg::read_text_file("/proc/" + word + "/comm").value_or("?\n");
    return "process " + word + " (" + comm.substr(0, comm.find('\n')) + ") is in " + dir +
           " too, and cgroup v2 gives controllers to a cgroup's children only when all its "
           "processes are in them";
  }
  return "";
}

// The service's cgroup: this process's, or, for a process the master of the pools started from
// its leaf (the new binary's --test-config at USR2), that leaf's parent.
std::optional<std::string> service_cgroup(std::string& why) {
  std::optional<std::string> dir = cg::own_cgroup_directory(why);
  const std::string leaf = std::string("/") + kSupervisorLeaf;
  if (dir && dir->ends_with(leaf)) dir->resize(dir->size() - leaf.size());
  return dir;
}

} // namespace

PoolCgroups::~PoolCgroups() {
  for (const auto& [pool, dir] : dirs_)
    to_remove_.push_back(dir);
  for (const std::string& dir : to_remove_)
    ::rmdir(dir.c_str());
}

void PoolCgroups::check(const std::vector<PoolSpec>& pools) const {
  for (const PoolSpec& p : pools) {
    if (!p.wants_cgroup()) continue;
    std::string why, option = option_for(*controllers_for(p).begin());
    std::optional<std::string> dir = base_.empty() ? service_cgroup(why) : base_;
    if (dir) why = unusable(*dir, p, option);
    if (!why.empty())
      throw PoolSpecError("pool [" + p.name + "]: " +
                          (option == "memory-max" ? p.where_memory_max : p.where_cpu_weight) +
                          ": " + why + kDelegateHint);
  }
}

// The first time a pool has limits: this process and its own into <cg>/supervisor, then the
// controllers enabled for <cg>'s children.
void PoolCgroups::prepare(const std::set<std::string>& controllers) {
  if (base_.empty()) {
    std::string why;
    std::optional<std::string> dir = service_cgroup(why);
    if (!dir) throw StartupError(why);
    const std::string leaf = *dir + "/" + kSupervisorLeaf;
    make_directory(leaf);
    move_own_processes(*dir);
    base_ = *dir;
    PM_LOG(LogLevel::Info, "cgroup: the master of the pools moved into " + leaf);
  }
  for (const std::string& c : controllers) {
    if (enabled_.count(c)) continue;
    const std::string control = base_ + "/cgroup.subtree_control";
    if (!write_file(control, "+" + c))
      throw StartupError(sys_error("write", control + "\", \"+" + c) +
                         (errno == EBUSY ? " (other processes are in " + base_ +
                                               ": cgroup v2 gives controllers only to a cgroup "
                                               "whose processes are all in its children)"
                                         : ""));
    enabled_.insert(c);
  }
}

// Every process of ours in `dir` (this one, the pools' masters and workers at a reload) into its
// supervisor leaf; a few passes, since a process may fork while they move.
void PoolCgroups::move_own_processes(const std::string& dir) const {
  const std::string leaf = dir + "/" + kSupervisorLeaf;
  for (int pass = 0; pass < 4; ++pass) {
    bool moved = false;
    const std::optional<std::string> procs = cg::read_text_file(dir + "/cgroup.procs");
    for (const std::string& word : procs ? cg::split_words(*procs) : std::vector<std::string>{}) {
      const pid_t pid = static_cast<pid_t>(std::atoi(word.c_str()));
      if (pid <= 0 || !is_own(pid)) continue;
      if (!write_file(leaf + "/cgroup.procs", word) && errno != ESRCH)
        throw StartupError(sys_error("write", leaf + "/cgroup.procs\", \"" + word));
      moved = true;
    }
    if (!moved) return;
  }
}

std::string PoolCgroups::apply(const PoolSpec& c) {
  auto known = dirs_.find(c.name);
  if (!c.wants_cgroup() && known == dirs_.end()) return "";
  prepare(controllers_for(c));
  const std::string dir = base_ + "/" + kPoolCgroupPrefix + c.name;
  make_directory(dir);
  if (enabled_.count("memory"))
    write_or_throw(dir + "/memory.max", c.memory_max && *c.memory_max != kNoMemoryLimit
                                            ? std::to_string(*c.memory_max)
                                            : "max");
  if (enabled_.count("cpu"))
    write_or_throw(dir + "/cpu.weight", std::to_string(c.cpu_weight.value_or(100)));
  dirs_[c.name] = dir;
  return dir;
}

void PoolCgroups::move(pid_t pid, const std::string& dir) {
  write_or_throw(dir + "/cgroup.procs", std::to_string(pid));
}

int PoolCgroups::open_procs(const std::string& dir) {
  const std::string path = dir + "/cgroup.procs";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw StartupError(sys_error("open", path));
  return fd;
}

bool PoolCgroups::join(int procs_fd) {
  char text[16];
  auto [end, err] = std::to_chars(text, text + sizeof text, ::getpid());
  const auto n = static_cast<std::size_t>(end - text);
  return err == std::errc() && ::write(procs_fd, text, n) == static_cast<ssize_t>(n);
}

void PoolCgroups::resume(const std::string& base) {
  if (base.empty()) return;
  base_ = base;
  const std::optional<std::string> enabled = cg::read_text_file(base_ + "/cgroup.subtree_control");
  for (const std::string& c : cg::split_words(enabled.value_or("")))
    enabled_.insert(c);
}

void PoolCgroups::remove(const std::string& pool) {
  auto it = dirs_.find(pool);
  if (it != dirs_.end()) {
    to_remove_.push_back(it->second);
    dirs_.erase(it);
  } else if (!base_.empty()) { // a pool the old image ran, after USR2 (missing: ENOENT, fine)
    to_remove_.push_back(base_ + "/" + kPoolCgroupPrefix + pool);
  }
  sweep();
}

void PoolCgroups::sweep() {
  std::erase_if(to_remove_, [](const std::string& dir) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno == EBUSY) return false; // its last processes are still exiting
    PM_LOG(LogLevel::Warn, "cgroup: " + sys_error("rmdir", dir));
    return true;
  });
}

} // namespace fcgi_host
