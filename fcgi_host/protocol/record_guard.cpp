#include "fcgi_host/protocol/record_guard.hpp"

#include "app/response.hpp"

#include <algorithm>
#include <cstring>
#include <fastcgi.h>

namespace fcgi_host {
namespace {

std::uint16_t be16(const char* p) {
  return static_cast<std::uint16_t>((static_cast<unsigned char>(p[0]) << 8) |
                                    static_cast<unsigned char>(p[1]));
}

const char* type_name(unsigned type) {
  static const char* const names[] = {"type 0",
                                      "BEGIN_REQUEST",
                                      "ABORT_REQUEST",
                                      "END_REQUEST",
                                      "PARAMS",
                                      "STDIN",
                                      "STDOUT",
                                      "STDERR",
                                      "DATA",
                                      "GET_VALUES",
                                      "GET_VALUES_RESULT",
                                      "UNKNOWN_TYPE"};
  return type < std::size(names) ? names[type] : "unknown type";
}

// Reads one name-value length (1 byte, or 4 bytes with the high bit set). False when the bytes
// run out.
bool read_length(const unsigned char*& p, const unsigned char* end, std::size_t& length) {
  if (p == end) return false;
  if (*p < 0x80) {
    length = *p++;
    return true;
  }
  if (end - p < 4) return false;
  length = (static_cast<std::size_t>(p[0] & 0x7f) << 24) | (static_cast<std::size_t>(p[1]) << 16) |
           (static_cast<std::size_t>(p[2]) << 8) | p[3];
  p += 4;
  return true;
}

} // namespace

RecordGuard::Verdict RecordGuard::close(std::string reason) {
  close_reason_ = std::move(reason);
  return Verdict::Close;
}

RecordGuard::Verdict RecordGuard::reject(int status, std::string reason) {
  error_status_ = status;
  close_reason_ = std::move(reason);
  return Verdict::Reject;
}

void RecordGuard::consume_request() {
  // Field by field rather than `*this = RecordGuard(...)`: the vector keeps its capacity, so a
  // kept connection allocates nothing per request.
  aborted_id_ = aborted_ ? request_id_ : 0;
  pos_ = 0;
  request_begin_ = 0;
  request_id_ = 0;
  keep_conn_ = params_done_ = aborted_ = ready_ = false;
  params_size_ = body_size_ = records_ = management_records_ = 0;
  content_length_ = -1;
  params_records_.clear();
  error_status_ = 0;
  close_reason_.clear();
}

RecordGuard::Verdict RecordGuard::management_record(std::uint8_t type, const char* content,
                                                    std::size_t length, std::string& replies) {
  if (++management_records_ > limits_.max_management_records)
    return close("more than " + std::to_string(limits_.max_management_records) +
                 " management records");
  if (type != FCGI_GET_VALUES) {
    // FastCGI 1.0, 4.2: an unknown management record is answered with FCGI_UNKNOWN_TYPE.
    records::append_header(replies, FCGI_UNKNOWN_TYPE, 0, 8);
    char body[8] = {static_cast<char>(type)};
    replies.append(body, sizeof body);
    return Verdict::NeedMore;
  }
  // Answer each known variable once, however often and in whatever order it was asked for.
  bool want_conns = false, want_reqs = false, want_mpxs = false;
  const auto* p = reinterpret_cast<const unsigned char*>(content);
  const auto* end = p + length;
  while (p < end) {
    std::size_t name_len = 0, value_len = 0;
    if (!read_length(p, end, name_len) || !read_length(p, end, value_len) ||
        static_cast<std::size_t>(end - p) < name_len ||
        static_cast<std::size_t>(end - p) - name_len < value_len)
      return close("malformed FCGI_GET_VALUES record");
    std::string_view name(reinterpret_cast<const char*>(p), name_len);
    want_conns |= name == FCGI_MAX_CONNS;
    want_reqs |= name == FCGI_MAX_REQS;
    want_mpxs |= name == FCGI_MPXS_CONNS;
    p += name_len + value_len;
  }
  std::string body;
  using records::append_name_value;
  if (want_conns) append_name_value(body, FCGI_MAX_CONNS, std::to_string(values_.max_conns));
  if (want_reqs) append_name_value(body, FCGI_MAX_REQS, std::to_string(values_.max_reqs));
  if (want_mpxs) append_name_value(body, FCGI_MPXS_CONNS, "0");
  std::uint8_t padding = static_cast<std::uint8_t>((8 - body.size() % 8) % 8);
  records::append_header(replies, FCGI_GET_VALUES_RESULT, 0, body.size(), padding);
  replies.append(body).append(padding, '\0');
  return Verdict::NeedMore;
}

RecordGuard::Verdict RecordGuard::begin_request(std::uint16_t id, const char* content,
                                                std::size_t length, std::string& replies) {
  if (length != 8)
    return close("FCGI_BEGIN_REQUEST with a body of " + std::to_string(length) +
                 " bytes instead of 8");
  if (request_id_ != 0) {
    if (id == request_id_)
      return close("a second FCGI_BEGIN_REQUEST for request " + std::to_string(id));
    // One request at a time per connection (FCGI_MPXS_CONNS=0). The refused request stays
    // inactive: its later records are ignored (FastCGI 1.0, 3.3), not taken as a violation.
    if (refused_ids_.size() >= kMaxRefusedIds)
      return close("more than " + std::to_string(kMaxRefusedIds) +
                   " requests multiplexed on one connection");
    if (std::find(refused_ids_.begin(), refused_ids_.end(), id) == refused_ids_.end())
      refused_ids_.push_back(id);
    records::append_end_request(replies, id, 0, FCGI_CANT_MPX_CONN);
    return Verdict::NeedMore;
  }
  unsigned role = be16(content);
  if (role != FCGI_RESPONDER) {
    records::append_end_request(replies, id, 0, FCGI_UNKNOWN_ROLE);
    return close("FastCGI role " + std::to_string(role) + " is not served (only RESPONDER)");
  }
  std::erase(refused_ids_, id); // a new request may reuse the id of a refused one
  request_id_ = id;
  keep_conn_ = (static_cast<unsigned char>(content[2]) & FCGI_KEEP_CONN) != 0;
  return Verdict::NeedMore;
}

RecordGuard::Verdict RecordGuard::check_params(const char* buf) {
  // The params stream is usually one record; when split, it is gathered first so that pairs
  // split across records are checked like any other.
  std::string gathered;
  const char* data;
  std::size_t size;
  if (params_records_.size() == 1) {
    const char* h = buf + params_records_[0];
    data = h + FCGI_HEADER_LEN;
    size = be16(h + 4);
  } else {
    gathered.reserve(params_size_);
    for (std::size_t offset : params_records_) {
      const char* h = buf + offset;
      gathered.append(h + FCGI_HEADER_LEN, be16(h + 4));
    }
    data = gathered.data();
    size = gathered.size();
  }
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const auto* end = p + size;
  std::size_t pairs = 0;
  while (p < end) {
    std::size_t name_len = 0, value_len = 0;
    if (!read_length(p, end, name_len) || !read_length(p, end, value_len) ||
        static_cast<std::size_t>(end - p) < name_len ||
        static_cast<std::size_t>(end - p) - name_len < value_len)
      return reject(400, "FastCGI params with a length beyond the params sent");
    if (++pairs > limits_.max_params)
      return reject(400, "more than " + std::to_string(limits_.max_params) + " FastCGI params");
    std::string_view name(reinterpret_cast<const char*>(p), name_len);
    std::string_view value(reinterpret_cast<const char*>(p) + name_len, value_len);
    p += name_len + value_len;
    if (name.empty() || name.find('\0') != name.npos || name.find('=') != name.npos)
      return reject(400, "a FastCGI param name that is empty or holds NUL or '='");
    if (value.find('\0') != value.npos)
      return reject(400, "FastCGI param " + std::string(name) + " holds a NUL byte");
    if (name == "CONTENT_LENGTH" && !value.empty()) {
      if (value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return reject(400,
                      "CONTENT_LENGTH '" + std::string(value.substr(0, 32)) + "' is not a number");
      content_length_ = std::stoll(std::string(value));
      if (static_cast<unsigned long long>(content_length_) > limits_.max_body)
        return reject(413, "CONTENT_LENGTH " + std::string(value) + " is over --max-body");
    }
  }
  return Verdict::NeedMore;
}

RecordGuard::Verdict RecordGuard::advance(char* buf, std::size_t& size, std::string& replies) {
  for (;;) {
    if (size - pos_ < FCGI_HEADER_LEN) return ready_ ? Verdict::RequestReady : Verdict::NeedMore;
    const char* h = buf + pos_;
    if (ready_) {
      // The request is complete and waits for its handler: only an abort of it is taken now;
      // anything else (a pipelined request) waits for consume_request().
      const std::size_t next = FCGI_HEADER_LEN + be16(h + 4) + static_cast<unsigned char>(h[6]);
      if (h[0] != FCGI_VERSION_1 || h[1] != FCGI_ABORT_REQUEST || be16(h + 2) != request_id_)
        return Verdict::RequestReady;
      if (size - pos_ < next) return Verdict::RequestReady;
      aborted_ = true;
      std::memmove(buf + pos_, buf + pos_ + next, size - pos_ - next);
      size -= next;
      continue;
    }
    const unsigned version = static_cast<unsigned char>(h[0]);
    const unsigned type = static_cast<unsigned char>(h[1]);
    const std::uint16_t id = be16(h + 2);
    const std::size_t length = be16(h + 4);
    const std::size_t record = FCGI_HEADER_LEN + length + static_cast<unsigned char>(h[6]);
    if (version != FCGI_VERSION_1) {
      if (std::memcmp(h, "GET ", 4) == 0 || std::memcmp(h, "POST", 4) == 0 ||
          std::memcmp(h, "HEAD", 4) == 0 || std::memcmp(h, "PRI ", 4) == 0)
        return close("HTTP spoken to the FastCGI socket");
      return close("FastCGI version " + std::to_string(version) + " (only 1 is spoken)");
    }
    if (id != 0 && id == request_id_) {
      // Refuse over-limit requests as soon as the header says so, before buffering the record.
      if (type == FCGI_PARAMS && params_size_ + length > limits_.max_params_size)
        return reject(400, "FastCGI params over --max-params-size (" +
                               std::to_string(limits_.max_params_size) + " bytes)");
      if (type == FCGI_STDIN && body_size_ + length > limits_.max_body)
        return reject(413, "request body over --max-body (" + std::to_string(limits_.max_body) +
                               " bytes)");
    }
    if (size - pos_ < record) return Verdict::NeedMore;
    if (++records_ > limits_.max_records)
      return close("more than " + std::to_string(limits_.max_records) + " records in a request");

    const char* content = h + FCGI_HEADER_LEN;
    auto drop_record = [&] {
      std::memmove(buf + pos_, buf + pos_ + record, size - pos_ - record);
      size -= record;
    };
    // libfcgi 2.4.2 does not skip the padding of FCGI_BEGIN_REQUEST nor that of the empty
    // record ending FCGI_PARAMS (it returns at once, and the SetReaderType that follows forgets
    // paddingLen): it reads the padding as the next header, and the params or the body are lost.
    // Padding is legal on every record (FastCGI 1.0, 3.3), so it is taken out here.
    auto strip_padding = [&] {
      const std::size_t padding = static_cast<unsigned char>(h[6]);
      if (padding == 0) return;
      const std::size_t end = pos_ + FCGI_HEADER_LEN + length;
      std::memmove(buf + end, buf + end + padding, size - end - padding);
      size -= padding;
      buf[pos_ + 6] = 0;
    };
    if (id == FCGI_NULL_REQUEST_ID) {
      if (Verdict v = management_record(type, content, length, replies); v != Verdict::NeedMore)
        return v;
      drop_record();
      continue;
    }
    if (type == FCGI_BEGIN_REQUEST) {
      bool fresh = request_id_ == 0;
      if (Verdict v = begin_request(id, content, length, replies); v != Verdict::NeedMore) return v;
      if (fresh) {
        strip_padding();
        request_begin_ = pos_;
        pos_ += FCGI_HEADER_LEN + length;
      } else {
        drop_record(); // refused with FCGI_CANT_MPX_CONN
      }
      continue;
    }
    if (id != request_id_) {
      // An abort of a request already ended, or the rest of a request ended by its abort.
      if (request_id_ == 0 &&
          (type == FCGI_ABORT_REQUEST ||
           (id == aborted_id_ && (type == FCGI_PARAMS || type == FCGI_STDIN)))) {
        drop_record();
        continue;
      }
      // The records of a request refused with FCGI_CANT_MPX_CONN: inactive, so ignored.
      if (std::find(refused_ids_.begin(), refused_ids_.end(), id) != refused_ids_.end()) {
        drop_record();
        continue;
      }
      return close(std::string(type_name(type)) + " record for request " + std::to_string(id) +
                   (request_id_ ? ", while serving request " + std::to_string(request_id_)
                                : ", outside any request"));
    }
    switch (type) {
    case FCGI_ABORT_REQUEST:
      // FastCGI 1.0, 5.4: answered as soon as possible, without waiting for the rest of the
      // request, which a web server that gave up may never send. Ready now: the worker ends it
      // with FCGI_END_REQUEST and runs no handler; late records of it are dropped.
      aborted_ = true;
      drop_record();
      ready_ = true;
      return Verdict::RequestReady;
    case FCGI_PARAMS:
      if (params_done_) return close("FCGI_PARAMS after the end of the params");
      if (length == 0) {
        strip_padding();
        pos_ += FCGI_HEADER_LEN;
        params_done_ = true;
        if (Verdict v = check_params(buf); v != Verdict::NeedMore) return v;
      } else {
        params_records_.push_back(pos_);
        pos_ += record;
        params_size_ += length;
      }
      continue;
    case FCGI_STDIN:
      if (!params_done_) return close("FCGI_STDIN before the end of the params");
      if (length == 0) {
        if (content_length_ >= 0 && body_size_ != static_cast<std::size_t>(content_length_))
          return reject(400, "a body of " + std::to_string(body_size_) +
                                 " bytes for CONTENT_LENGTH " + std::to_string(content_length_));
        pos_ += record;
        ready_ = true;
        return Verdict::RequestReady;
      }
      body_size_ += length;
      if (content_length_ >= 0 && body_size_ > static_cast<std::size_t>(content_length_))
        return reject(400, "a body longer than CONTENT_LENGTH " + std::to_string(content_length_));
      pos_ += record;
      continue;
    default:
      return close(std::string("unexpected ") + type_name(type) + " record from the web server");
    }
  }
}

namespace records {

void append_header(std::string& out, std::uint8_t type, std::uint16_t id, std::size_t length,
                   std::uint8_t padding) {
  char h[FCGI_HEADER_LEN] = {FCGI_VERSION_1,
                             static_cast<char>(type),
                             static_cast<char>(id >> 8),
                             static_cast<char>(id & 0xff),
                             static_cast<char>((length >> 8) & 0xff),
                             static_cast<char>(length & 0xff),
                             static_cast<char>(padding),
                             0};
  out.append(h, sizeof h);
}

void append_end_request(std::string& out, std::uint16_t id, std::uint32_t app_status,
                        std::uint8_t protocol_status) {
  append_header(out, FCGI_END_REQUEST, id, 8);
  char body[8] = {static_cast<char>(app_status >> 24), static_cast<char>((app_status >> 16) & 0xff),
                  static_cast<char>((app_status >> 8) & 0xff), static_cast<char>(app_status & 0xff),
                  static_cast<char>(protocol_status)};
  out.append(body, sizeof body);
}

void append_error_response(std::string& out, std::uint16_t id, int status) {
  std::string_view reason = app::reason_phrase(status);
  std::string text = "Status: " + std::to_string(status) + " " + std::string(reason) +
                     "\r\nContent-Type: text/plain\r\n\r\n" + std::string(reason) + "\n";
  append_header(out, FCGI_STDOUT, id, text.size());
  out.append(text);
  append_header(out, FCGI_STDOUT, id, 0);
  append_end_request(out, id, 0, FCGI_REQUEST_COMPLETE);
}

void append_name_value(std::string& out, std::string_view name, std::string_view value) {
  auto length = [&out](std::size_t n) {
    if (n < 128) {
      out.push_back(static_cast<char>(n));
      return;
    }
    out.push_back(static_cast<char>(((n >> 24) & 0x7f) | 0x80));
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    out.push_back(static_cast<char>((n >> 8) & 0xff));
    out.push_back(static_cast<char>(n & 0xff));
  };
  length(name.size());
  length(value.size());
  out.append(name).append(value);
}

} // namespace records
} // namespace fcgi_host
