#include "app/spill_buffer.hpp"

#include <algorithm>
#include <stdexcept>

namespace app {

void SpillBuffer::spill() {
  file_.reset(std::tmpfile());
  if (!file_) throw std::runtime_error("cannot create a temporary file for a large body");
  if (!memory_.empty() &&
      std::fwrite(memory_.data(), 1, memory_.size(), file_.get()) != memory_.size())
    throw std::runtime_error("cannot write a large body to its temporary file");
  memory_.clear();
}

void SpillBuffer::expect(std::size_t size) {
  if (file_) return;
  if (size_ + size > threshold_)
    spill();
  else
    memory_.reserve(size_ + size);
}

void SpillBuffer::append(const char* data, std::size_t size) {
  if (size == 0) return;
  if (!file_ && size_ + size > threshold_) spill();
  if (file_) {
    if (std::fwrite(data, 1, size, file_.get()) != size)
      throw std::runtime_error("cannot write a large body to its temporary file");
  } else {
    memory_.append(data, size);
  }
  size_ += size;
}

char* SpillBuffer::append_space(std::size_t size) {
  if (file_ || size_ + size > threshold_) return nullptr;
  memory_.resize(size_ + size);
  return memory_.data() + size_;
}

void SpillBuffer::commit(std::size_t n) {
  size_ += n;
  memory_.resize(size_);
}

void SpillBuffer::clear() {
  memory_.clear();
  file_.reset();
  size_ = 0;
}

bool SpillBuffer::release(std::size_t above) {
  bool had_file = file_ != nullptr;
  bool large = memory_.capacity() >= above;
  clear();
  if (large) std::string().swap(memory_);
  return had_file || large;
}

std::size_t SpillBuffer::read(std::size_t offset, char* out, std::size_t size) const {
  if (offset >= size_) return 0;
  size = std::min(size, size_ - offset);
  if (!file_) {
    memory_.copy(out, size, offset);
    return size;
  }
  std::fflush(file_.get());
  if (std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0) return 0;
  std::size_t got = std::fread(out, 1, size, file_.get());
  std::fseek(file_.get(), 0, SEEK_END); // appends continue at the end
  return got;
}

std::string SpillBuffer::contents() const {
  if (!file_) return memory_;
  std::string all(size_, '\0');
  all.resize(read(0, all.data(), size_));
  return all;
}

} // namespace app
