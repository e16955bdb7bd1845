#pragma once
// app::SpillBuffer: bytes held in memory up to a threshold, then moved to an unlinked temporary
// file (std::tmpfile: the file has no name on disk and disappears when closed, even if the
// process dies). Request bodies and multipart parts use it, so that a large upload costs disk,
// not memory.
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace app {

class SpillBuffer {
public:
  static constexpr std::size_t kDefaultThreshold = 1 << 20; // 1 MiB

  explicit SpillBuffer(std::size_t threshold = kDefaultThreshold) : threshold_(threshold) {}

  // Bytes beyond `threshold` in memory go to a temporary file. Applies from the next append.
  void set_threshold(std::size_t threshold) { threshold_ = threshold; }
  std::size_t threshold() const { return threshold_; }

  // Appends bytes; throws std::runtime_error when the temporary file cannot be written.
  void append(const char* data, std::size_t size);
  void append(std::string_view text) { append(text.data(), text.size()); }
  // Filling in place (a read straight into the body, no copy after): room for `size` more bytes
  // in memory, or null when they would not stay under the threshold (or it spilled already: then
  // append() them). commit(n) keeps the first n of them; the rest of the room is dropped.
  char* append_space(std::size_t size);
  void commit(std::size_t n);
  // A hint that `size` bytes will follow: reserves memory, or spills at once when they will not
  // fit under the threshold (saving the copy through memory).
  void expect(std::size_t size);
  // Empties the buffer and closes the file; keeps the memory capacity for the next use.
  void clear();
  // Exchanges the contents (bytes, memory, file); each keeps its threshold.
  void swap(SpillBuffer& other) noexcept {
    std::swap(size_, other.size_);
    memory_.swap(other.memory_);
    file_.swap(other.file_);
  }
  // Empties it and frees its memory when that grew to `above` bytes or more (else keeps it for
  // the next request). True when it held a file or freed memory.
  bool release(std::size_t above);

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool spilled() const { return file_ != nullptr; }
  // The bytes when they are in memory; empty once spilled.
  const std::string& memory() const { return memory_; }
  // Copies up to `size` bytes starting at `offset` into `out`; returns how many (0 at the end).
  std::size_t read(std::size_t offset, char* out, std::size_t size) const;
  // All bytes as one string (reads the file when spilled).
  std::string contents() const;

private:
  void spill();
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::size_t threshold_;
  std::size_t size_ = 0;
  std::string memory_;
  std::unique_ptr<std::FILE, Closer> file_;
};

} // namespace app
