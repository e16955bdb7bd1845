#include "fcgi_host/worker/crash_capture.hpp"

#include "fcgi_host/protocol/capture_file.hpp"
#include "fcgi_host/protocol/capture_redaction.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/sys_error.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// Text built in a fixed buffer, cut to fit: nothing here allocates.
template <std::size_t N> class Text {
public:
  Text& add(std::string_view s) {
    for (char c : s)
      if (size_ < N)
        bytes_[size_++] = c;
      else
        cut_ = true;
    return *this;
  }
  Text& add(std::uint64_t n) {
    char digits[20];
    std::size_t k = 0;
    do {
      digits[k++] = static_cast<char>('0' + n % 10);
      n /= 10;
    } while (n != 0);
    while (k > 0)
      add(std::string_view(&digits[--k], 1));
    return *this;
  }
  Text& add_2(unsigned n) { // two digits
    char d[2] = {static_cast<char>('0' + n / 10 % 10), static_cast<char>('0' + n % 10)};
    return add(std::string_view(d, 2));
  }
  std::string_view view() const { return {bytes_, size_}; }
  bool cut() const { return cut_; }

private:
  char bytes_[N];
  std::size_t size_ = 0;
  bool cut_ = false;
};

// UTC from the epoch, without gmtime (not async-signal-safe): days to a civil date.
template <std::size_t N> void add_utc(Text<N>& t, std::time_t now) {
  std::int64_t days = now / 86400, secs = now % 86400;
  std::int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
  std::int64_t doe = z - era * 146097;
  std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  unsigned d = static_cast<unsigned>(doy - (153 * mp + 2) / 5 + 1);
  unsigned m = static_cast<unsigned>(mp < 10 ? mp + 3 : mp - 9);
  std::uint64_t y = static_cast<std::uint64_t>(yoe + era * 400 + (m <= 2));
  t.add(y).add("-").add_2(m).add("-").add_2(d).add("T").add_2(static_cast<unsigned>(secs / 3600));
  t.add(":").add_2(static_cast<unsigned>(secs / 60 % 60)).add(":");
  t.add_2(static_cast<unsigned>(secs % 60)).add("Z");
}

void set_note(process_manager::WorkerSlot& slot, std::string_view note) {
  std::size_t n =
      note.size() < sizeof slot.crash_note - 1 ? note.size() : sizeof slot.crash_note - 1;
  for (std::size_t i = 0; i < n; ++i)
    slot.crash_note[i] = note[i];
  slot.crash_note[n] = '\0';
}

// The request's bytes into the private buffer. process_vm_readv on the worker itself stops
// at the first page that is not readable instead of faulting; where it is not allowed (a
// seccomp filter), a plain copy.
std::size_t copy_request(char* to, const char* from, std::size_t n) {
  iovec local{to, n}, remote{const_cast<char*>(from), n};
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got >= 0) return static_cast<std::size_t>(got);
  if (errno == EFAULT) return 0;
  std::memcpy(to, from, n);
  return n;
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

const char* errno_name(int e) {
  const char* name = strerrorname_np(e); // a static table: safe in a signal handler
  return name ? name : "an error";
}

// The first free DIR/PREFIX-N.fcgi of N = 1 .. --capture-max-files, opened; -1 with the note
// set when none. By path: a directory descriptor held open from boot would be one more fd the
// worker loop's per-wait scans of its connection table walk past, on every request.
using FileName = Text<512>;
int take_file(const CaptureSettings& settings, process_manager::WorkerSlot& slot, FileName& name) {
  for (unsigned n = 1; n <= settings.max_files; ++n) {
    name = FileName();
    name.add(settings.dir).add("/").add(settings.file_prefix).add("-").add(std::uint64_t{n});
    name.add(".fcgi").add(std::string_view("\0", 1));
    if (name.cut()) {
      set_note(slot, "request not captured: the file's path is too long");
      return -1;
    }
    int fd = ::open(name.view().data(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      fchmod(fd, 0600); // whatever the umask
      return fd;
    }
    if (errno != EEXIST) {
      Text<512> note;
      note.add("request not captured: open(").add(name.view().data());
      note.add(") failed: ").add(errno_name(errno));
      set_note(slot, note.view());
      return -1;
    }
  }
  Text<512> note;
  note.add("request not captured: ").add(settings.dir).add(" holds --capture-max-files (");
  note.add(std::uint64_t{settings.max_files}).add(") captures already; remove them to keep more");
  set_note(slot, note.view());
  return -1;
}

} // namespace

CrashCapture::~CrashCapture() {
  if (buffer_) munmap(buffer_, buffer_size_);
}

std::string CrashCapture::open(const CaptureSettings& settings) {
  settings_ = settings;
  struct stat st {};
  if (::stat(settings.dir.c_str(), &st) != 0)
    return "capture-crashes: " + sys_error("stat", settings.dir);
  if (!S_ISDIR(st.st_mode)) return "capture-crashes: \"" + settings.dir + "\" is not a directory";
  if (::access(settings.dir.c_str(), W_OK | X_OK) != 0)
    return "capture-crashes: \"" + settings.dir +
           "\" is not writable by the worker's user: " + std::strerror(errno);
  buffer_size_ = settings.max_bytes;
  void* p = mmap(nullptr, buffer_size_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return "capture-crashes: " + sys_error("mmap", "capture buffer");
  buffer_ = static_cast<char*>(p);
  return {};
}

void CrashCapture::save(process_manager::WorkerSlot& slot, int sig, const char* data,
                        std::size_t size) {
  const std::size_t wanted = size < settings_.max_bytes ? size : settings_.max_bytes;
  const std::size_t copied = copy_request(buffer_, data, wanted);
  capture::CaptureShape shape = capture::fit_records(buffer_, copied);
  if (shape.params_end == 0) {
    set_note(slot, copied == wanted && wanted < size
                       ? "request not captured: its params are larger than --capture-max-bytes"
                       : "request not captured: its records could not be read");
    return;
  }
  capture::RedactionReport redacted;
  capture::redact_records(buffer_, shape.size, settings_.redact, redacted);
  FileName name;
  int fd = take_file(settings_, slot, name);
  if (fd < 0) return;

  Text<1024> head;
  head.add(capture::kFileMagic).add("\ntime: ");
  add_utc(head, std::time(nullptr));
  head.add("\npid: ").add(static_cast<std::uint64_t>(getpid()));
  const char* abbrev = sigabbrev_np(sig);
  head.add("\nsignal: ").add(static_cast<std::uint64_t>(sig)).add(" (SIG");
  head.add(abbrev ? abbrev : "?").add(")\nrequest: ").add(std::uint64_t{size});
  head.add(" bytes, captured: ").add(std::uint64_t{shape.size}).add(" bytes\nbody: ");
  if (!settings_.keep_body)
    head.add("dropped (--capture-body off)");
  else
    head.add(std::uint64_t{shape.body_bytes})
        .add(shape.cut ? " bytes, cut (--capture-max-bytes)" : " bytes, whole");
  head.add("\nredacted: ");
  if (redacted.redacted == 0)
    head.add("nothing");
  else
    head.add(redacted.names_text()).add(" (values replaced by x, same length)");
  head.add("\n\n");
  // A body dropped or cut still ends: the empty STDIN record closes the request.
  const bool close_body = !settings_.keep_body || !shape.body_ended;
  const char stdin_end[records::kHeaderSize] = {
      1, static_cast<char>(records::Type::Stdin), buffer_[2], buffer_[3], 0, 0, 0, 0};
  bool ok = write_all(fd, head.view().data(), head.view().size()) &&
            write_all(fd, buffer_, settings_.keep_body ? shape.size : shape.params_end) &&
            (!close_body || write_all(fd, stdin_end, sizeof stdin_end));
  const int write_errno = errno;
  ::close(fd);
  Text<512> note;
  if (ok) {
    note.add("request captured to ").add(name.view().data());
    // Its crash block is then always written: the log names every file kept.
    slot.crash_captured.store(true, std::memory_order_release);
  } else {
    ::unlink(name.view().data()); // a part of a request would not replay
    note.add("request not captured: write(").add(name.view().data());
    note.add(") failed: ").add(errno_name(write_errno));
  }
  set_note(slot, note.view());
}

} // namespace fcgi_host
