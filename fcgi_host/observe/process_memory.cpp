#include "fcgi_host/observe/process_memory.hpp"

#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace fcgi_host {
namespace {

// The file's descriptor, closed when the read is done.
struct OpenFile {
  int fd;
  explicit OpenFile(const char* path) : fd(::open(path, O_RDONLY | O_CLOEXEC)) {}
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
};

// The kB figure of the line starting with `key` ("Pss:"), at the start of a line.
std::optional<std::uint64_t> field_kib(std::string_view text, std::string_view key) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.starts_with(key)) {
      line.remove_prefix(key.size());
      std::size_t digits = line.find_first_not_of(' ');
      if (digits == std::string_view::npos) return std::nullopt;
      std::uint64_t kib = 0;
      auto [ptr, ec] = std::from_chars(line.data() + digits, line.data() + line.size(), kib);
      if (ec != std::errc() || ptr == line.data() + digits) return std::nullopt;
      return kib;
    }
    at = end + 1;
  }
  return std::nullopt;
}

} // namespace

std::optional<ProcessMemory> parse_smaps_rollup(std::string_view text) {
  std::optional<std::uint64_t> rss = field_kib(text, "Rss:");
  std::optional<std::uint64_t> pss = field_kib(text, "Pss:");
  if (!rss || !pss) return std::nullopt;
  return ProcessMemory{*pss * 1024, *rss * 1024};
}

std::optional<ProcessMemory> read_smaps_rollup_file(const char* path) {
  OpenFile file(path);
  if (file.fd < 0) return std::nullopt;
  // The file is about 1 KiB (a header line and some twenty fields); Rss and Pss come first.
  char buf[4096];
  std::size_t size = 0;
  while (size < sizeof buf) {
    ssize_t n = ::read(file.fd, buf + size, sizeof buf - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
  }
  return parse_smaps_rollup(std::string_view(buf, size));
}

std::optional<ProcessMemory> read_process_memory(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/smaps_rollup";
  return read_smaps_rollup_file(path.c_str());
}

void add_process_memory(Snapshot& snap, pid_t master_pid) {
  std::uint64_t pss = 0;
  std::uint32_t processes = 0;
  for (WorkerSnapshot& w : snap.workers) {
    if (w.pid <= 0) continue;
    if ((w.memory = read_process_memory(w.pid))) {
      pss += w.memory->pss_bytes;
      ++processes;
    }
  }
  // No total without the master's figure: one worker's own, all a worker started by root can read,
  // would pass for the pool's.
  // The mold's pages are the pool's too: the workers share most of them with it.
  if (snap.mold.pid > 0 && (snap.mold.memory = read_process_memory(snap.mold.pid))) {
    pss += snap.mold.memory->pss_bytes;
    ++processes;
  }
  std::optional<ProcessMemory> master = read_process_memory(master_pid);
  if (!master) return;
  snap.pss_total_bytes = pss + master->pss_bytes;
  snap.pss_processes = processes + 1;
}

} // namespace fcgi_host
