#pragma once
// A growable byte buffer for one connection's input: bytes are appended at the end and consumed
// from the front. Unlike std::vector<char> it never zero-fills what read(2) will overwrite.
#include <cstddef>
#include <cstring>
#include <memory>

namespace fcgi_host {

class ByteBuffer {
public:
  char* data() { return data_.get(); }
  std::size_t& size() { return size_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t free_space() const { return capacity_ - size_; }
  char* tail() { return data_.get() + size_; }

  // Makes room for at least `n` more bytes.
  void reserve_more(std::size_t n) {
    if (free_space() >= n) return;
    std::size_t wanted = capacity_ ? capacity_ : 4096;
    while (wanted - size_ < n)
      wanted *= 2;
    auto bigger = std::make_unique_for_overwrite<char[]>(wanted);
    if (size_) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = wanted;
  }
  void consume_front(std::size_t n) {
    if (n >= size_) {
      size_ = 0;
      return;
    }
    std::memmove(data_.get(), data_.get() + n, size_ - n);
    size_ -= n;
  }
  // Gives memory back after an unusually large request.
  void shrink_if_above(std::size_t limit) {
    if (capacity_ <= limit || size_ > limit / 2) return;
    auto smaller = std::make_unique_for_overwrite<char[]>(limit / 2);
    if (size_) std::memcpy(smaller.get(), data_.get(), size_);
    data_ = std::move(smaller);
    capacity_ = limit / 2;
  }

private:
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

} // namespace fcgi_host
