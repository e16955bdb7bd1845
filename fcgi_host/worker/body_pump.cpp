#include "fcgi_host/worker/body_pump.hpp"

#include <algorithm>

namespace fcgi_host {
namespace {
constexpr int kReadsPerTurn = 16;
} // namespace

BodyPump::BodyPump(int fd, const StdinStream::Start& start, std::string_view buffered,
                   std::size_t spill_threshold, app::SpillBuffer& storage)
    : source_(fd, start, buffered),
      declared_(static_cast<std::size_t>(std::max(0LL, start.content_length))) {
  body_.swap(storage);
  body_.clear(); // its capacity stays
  body_.set_threshold(spill_threshold);
  // Its memory at once, or its temporary file when it will not fit: no growing copies.
  body_.expect(declared_);
}

BodyPump::Result BodyPump::pump() {
  Result result = Result::NeedMore;
  // Bytes read already are never left waiting: the socket would not wake the loop for them.
  for (int i = 0; result == Result::NeedMore && (i < kReadsPerTurn || source_.has_pending()); ++i) {
    // Room for the rest of the record being read (its header is taken first, into the source's
    // own buffer): what the kernel copies there stays; nothing is zero-filled twice.
    const std::size_t want = source_.stream().content_left();
    BodySource::Status status;
    if (want == 0) {
      source_.read(nullptr, 0, status); // a header next
    } else if (char* room = staged_ == 0 ? body_.append_space(want) : nullptr) {
      body_.commit(source_.read(room, want, status));
    } else {
      // Spilled: gathered in the stage, written to the file in large writes.
      if (!stage_) stage_ = std::make_unique_for_overwrite<char[]>(kStage);
      staged_ += source_.read(stage_.get() + staged_, kStage - staged_, status);
      if (staged_ == kStage) flush_stage();
    }
    if (status == BodySource::Status::WouldBlock) break;
    if (status == BodySource::Status::End) result = Result::End;
    if (status == BodySource::Status::Failed) result = Result::Failed;
  }
  flush_stage();
  return result;
}

void BodyPump::flush_stage() {
  if (staged_ == 0) return;
  body_.append(stage_.get(), staged_); // throws when the temporary file cannot be written
  staged_ = 0;
}

} // namespace fcgi_host
