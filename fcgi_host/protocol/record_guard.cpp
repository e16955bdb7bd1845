#include "fcgi_host/protocol/record_guard.hpp"

#include <algorithm>
#include <cstring>

namespace fcgi_host {
using records::Type;

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
  keep_conn_ = params_done_ = aborted_ = ready_ = streamed_ = false;
  params_size_ = body_size_ = records_ = management_records_ = 0;
  params_.clear();
  params_records_.clear();
  stdin_records_.clear();
  error_status_ = 0;
  close_reason_.clear();
}

void RecordGuard::reset() {
  consume_request();
  aborted_id_ = 0;
  refused_ids_.clear();
}

RecordGuard::Verdict RecordGuard::management_record(std::uint8_t type, const char* content,
                                                    std::size_t length, std::string& replies) {
  if (++management_records_ > limits_.max_management_records)
    return close("more than " + std::to_string(limits_.max_management_records) +
                 " management records");
  if (type != static_cast<std::uint8_t>(Type::GetValues)) {
    // FastCGI 1.0, 4.2: an unknown management record is answered with FCGI_UNKNOWN_TYPE.
    records::append_unknown_type(replies, type);
    return Verdict::NeedMore;
  }
  // Answer each known variable once, however often and in whatever order it was asked for.
  bool want_conns = false, want_reqs = false, want_mpxs = false;
  std::string_view pairs(content, length);
  for (records::NameValue pair;;) {
    records::PairStatus status = records::next_name_value(pairs, pair);
    if (status == records::PairStatus::End) break;
    if (status == records::PairStatus::Truncated) return close("malformed FCGI_GET_VALUES record");
    want_conns |= pair.name == records::kMaxConns;
    want_reqs |= pair.name == records::kMaxReqs;
    want_mpxs |= pair.name == records::kMpxsConns;
  }
  std::string body;
  using records::append_name_value;
  if (want_conns) append_name_value(body, records::kMaxConns, std::to_string(values_.max_conns));
  if (want_reqs) append_name_value(body, records::kMaxReqs, std::to_string(values_.max_reqs));
  if (want_mpxs) append_name_value(body, records::kMpxsConns, "0");
  records::append_get_values_result(replies, body);
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
    records::append_end_request(replies, id, 0, records::ProtocolStatus::CantMpxConn);
    return Verdict::NeedMore;
  }
  records::BeginRequest begin;
  records::decode_begin_request(std::string_view(content, length), begin);
  if (begin.role != static_cast<std::uint16_t>(records::Role::Responder)) {
    records::append_end_request(replies, id, 0, records::ProtocolStatus::UnknownRole);
    return close("FastCGI role " + std::to_string(begin.role) + " is not served (only RESPONDER)");
  }
  std::erase(refused_ids_, id); // a new request may reuse the id of a refused one
  request_id_ = id;
  keep_conn_ = begin.keep_conn();
  return Verdict::NeedMore;
}

RecordGuard::Verdict RecordGuard::check_params(const char* buf) {
  // The params stream is usually one record; when split, it is gathered first so that pairs
  // split across records are checked like any other. The spans of the scan are offsets into
  // that run of bytes, which the decoder makes in place (request_decoder.hpp).
  std::string gathered;
  std::string_view data;
  if (params_records_.size() == 1) {
    const char* h = buf + request_begin_ + params_records_[0];
    data = std::string_view(h + records::kHeaderSize, records::decode_header(h).content_length);
  } else {
    gathered.reserve(params_size_);
    for (std::size_t offset : params_records_) {
      const char* h = buf + request_begin_ + offset;
      gathered.append(h + records::kHeaderSize, records::decode_header(h).content_length);
    }
    data = gathered;
  }
  ParamScanResult scan = scan_params(data, {limits_.max_params, limits_.max_body}, params_);
  return scan.problem == ParamProblem::None ? Verdict::NeedMore : refuse_params(scan);
}

RecordGuard::Verdict RecordGuard::refuse_params(const ParamScanResult& scan) {
  const std::string_view name = scan.pair.name, value = scan.pair.value;
  switch (scan.problem) {
  case ParamProblem::None:
    break;
  case ParamProblem::Truncated:
    return reject(400, "FastCGI params with a length beyond the params sent");
  case ParamProblem::TooMany:
    return reject(400, "more than " + std::to_string(limits_.max_params) + " FastCGI params");
  case ParamProblem::BadName:
    return reject(400, "a FastCGI param name that is empty or holds NUL or '='");
  case ParamProblem::NulInValue:
    return reject(400, "FastCGI param " + std::string(name) + " holds a NUL byte");
  case ParamProblem::TwoValues:
    return reject(400, "FastCGI param " + std::string(name) + " sent twice, as '" +
                           std::string(scan.earlier.substr(0, 32)) + "' and '" +
                           std::string(value.substr(0, 32)) + "'");
  case ParamProblem::NotANumber:
    return reject(400, "CONTENT_LENGTH '" + std::string(value.substr(0, 32)) + "' is not a number");
  case ParamProblem::OverMaxBody:
    return reject(413, "CONTENT_LENGTH " + std::string(value) + " is over --max-body");
  }
  return Verdict::NeedMore;
}

RecordGuard::Verdict RecordGuard::advance(char* buf, std::size_t& size, std::string& replies) {
  if (std::optional<Verdict> v = usual_request(buf, size)) return *v;
  for (;;) {
    if (size - pos_ < records::kHeaderSize)
      return ready_ ? Verdict::RequestReady : Verdict::NeedMore;
    const records::Header header = records::decode_header(buf + pos_);
    Scan s{buf, size, replies, header, header.record_size()};
    if (std::optional<Verdict> v = ready_ ? while_ready(s) : next_record(s)) return *v;
  }
}

// What a web server sends for a request without a body, nearly always in one read: BEGIN_REQUEST
// for RESPONDER, one PARAMS record, the empty PARAMS, the empty STDIN, all version 1 and of one
// request, no padding on the two records whose padding would be taken out. Checked and taken
// here in one step, into the same state the steps of advance() reach record by record (the
// fuzzer feeds every input whole and byte by byte, and requires the same outcome): those steps
// cost four times as much for these four records. Anything else, or a guard that is not
// between requests, is left to them.
std::optional<RecordGuard::Verdict> RecordGuard::usual_request(char* buf, std::size_t size) {
  constexpr std::size_t kBegin = records::kHeaderSize + 8;
  if (request_id_ != 0 || ready_ || pos_ != 0 || !refused_ids_.empty() || limits_.max_records < 4 ||
      size < kBegin + 3 * records::kHeaderSize)
    return std::nullopt;
  const records::Header begin = records::decode_header(buf);
  const auto* role = reinterpret_cast<const unsigned char*>(buf + records::kHeaderSize);
  if (begin.version != records::kVersion || !begin.is(Type::BeginRequest) ||
      begin.request_id == records::kNullRequestId || begin.content_length != 8 ||
      begin.padding != 0 || (role[0] << 8 | role[1]) != static_cast<int>(records::Role::Responder))
    return std::nullopt;
  const std::uint16_t id = begin.request_id;
  auto is = [&](const records::Header& h, Type type) {
    return h.version == records::kVersion && h.is(type) && h.request_id == id;
  };
  const records::Header params = records::decode_header(buf + kBegin);
  const std::size_t params_end = kBegin + params.record_size();
  if (!is(params, Type::Params) || params.content_length == 0 ||
      params.content_length > limits_.max_params_size ||
      size < params_end + 2 * records::kHeaderSize)
    return std::nullopt;
  const records::Header params_end_record = records::decode_header(buf + params_end);
  const records::Header stdin_end = records::decode_header(buf + params_end + records::kHeaderSize);
  if (!is(params_end_record, Type::Params) || params_end_record.content_length != 0 ||
      params_end_record.padding != 0 || !is(stdin_end, Type::Stdin) ||
      stdin_end.content_length != 0 ||
      size < params_end + records::kHeaderSize + stdin_end.record_size())
    return std::nullopt;
  // BEGIN_REQUEST, the params record and the end of the params, as next_record() takes them.
  records_ = 3;
  request_id_ = id;
  keep_conn_ = (role[2] & records::kKeepConn) != 0;
  request_begin_ = 0;
  params_records_.push_back(kBegin);
  params_size_ = params.content_length;
  params_done_ = true;
  pos_ = params_end + records::kHeaderSize;
  if (Verdict v = check_params(buf); v != Verdict::NeedMore) return v;
  records_ = 4;
  return end_of_body(stdin_end.record_size());
}

// The empty STDIN record (`record` bytes with its padding) at pos_: the request is whole, when
// its body has the length CONTENT_LENGTH declared.
RecordGuard::Verdict RecordGuard::end_of_body(std::size_t record) {
  const long long declared = params_.content_length;
  if (declared >= 0 && body_size_ != static_cast<std::size_t>(declared)) return refuse_body();
  pos_ += record;
  ready_ = true;
  return Verdict::RequestReady;
}

void RecordGuard::take_out(Scan& s, std::size_t at, std::size_t n) {
  std::memmove(s.buf + at, s.buf + at + n, s.size - at - n);
  s.size -= n;
}

// libfcgi 2.4.2 does not skip the padding of FCGI_BEGIN_REQUEST nor that of the empty record
// ending FCGI_PARAMS (it returns at once, and the SetReaderType that follows forgets
// paddingLen): it reads the padding as the next header, and the params or the body are lost.
// Padding is legal on every record (FastCGI 1.0, 3.3), so it is taken out here.
void RecordGuard::strip_padding(Scan& s) {
  if (s.header.padding == 0) return;
  take_out(s, pos_ + records::kHeaderSize + s.header.content_length, s.header.padding);
  s.buf[pos_ + records::kPaddingLengthOffset] = 0;
}

// The request is complete and waits for its handler: only an abort of it is taken now; anything
// else (a pipelined request) waits for consume_request().
std::optional<RecordGuard::Verdict> RecordGuard::while_ready(Scan& s) {
  const records::Header& h = s.header;
  if (h.version != records::kVersion || !h.is(Type::AbortRequest) || h.request_id != request_id_ ||
      s.size - pos_ < s.record)
    return Verdict::RequestReady;
  aborted_ = true;
  drop_record(s);
  return std::nullopt;
}

// What the header alone decides: the version, and the request's limits, refused as soon as a
// header says so, before its record is buffered.
std::optional<RecordGuard::Verdict> RecordGuard::check_header(const Scan& s) {
  const records::Header& h = s.header;
  if (h.version != records::kVersion) return refuse_version(s);
  if (h.request_id == 0 || h.request_id != request_id_) return std::nullopt;
  if (h.is(Type::Params) && params_size_ + h.content_length > limits_.max_params_size)
    return refuse_size(Type::Params);
  if (h.is(Type::Stdin) && body_size_ + h.content_length > limits_.max_body)
    return refuse_size(Type::Stdin);
  return std::nullopt;
}

// The refusals of check_header(), out of line: building their text kept the checks of every
// record from being inlined into the scan.
RecordGuard::Verdict RecordGuard::refuse_version(const Scan& s) {
  const char* p = s.buf + pos_;
  if (std::memcmp(p, "GET ", 4) == 0 || std::memcmp(p, "POST", 4) == 0 ||
      std::memcmp(p, "HEAD", 4) == 0 || std::memcmp(p, "PRI ", 4) == 0)
    return close("HTTP spoken to the FastCGI socket");
  return close("FastCGI version " + std::to_string(s.header.version) + " (only 1 is spoken)");
}

RecordGuard::Verdict RecordGuard::refuse_size(Type stream) {
  if (stream == Type::Params)
    return reject(400, "FastCGI params over --max-params-size (" +
                           std::to_string(limits_.max_params_size) + " bytes)");
  return reject(413,
                "request body over --max-body (" + std::to_string(limits_.max_body) + " bytes)");
}

// One whole record, by its request id and type.
std::optional<RecordGuard::Verdict> RecordGuard::next_record(Scan& s) {
  if (std::optional<Verdict> v = check_header(s)) return v;
  if (s.size - pos_ < s.record) return Verdict::NeedMore;
  if (++records_ > limits_.max_records) return refuse_records();
  const records::Header& h = s.header;
  if (h.request_id == records::kNullRequestId) {
    Verdict v = management_record(h.type, content(s), h.content_length, s.replies);
    if (v != Verdict::NeedMore) return v;
    drop_record(s);
    return std::nullopt;
  }
  if (h.is(Type::BeginRequest)) {
    const bool fresh = request_id_ == 0;
    Verdict v = begin_request(h.request_id, content(s), h.content_length, s.replies);
    if (v != Verdict::NeedMore) return v;
    if (!fresh) {
      drop_record(s); // refused with FCGI_CANT_MPX_CONN
      return std::nullopt;
    }
    strip_padding(s);
    request_begin_ = pos_;
    pos_ += records::kHeaderSize + h.content_length;
    return std::nullopt;
  }
  if (h.request_id != request_id_) return other_request_record(s);
  if (h.is(Type::AbortRequest)) {
    // FastCGI 1.0, 5.4: answered as soon as possible, without waiting for the rest of the
    // request, which a web server that gave up may never send. Ready now: the worker ends it
    // with FCGI_END_REQUEST and runs no handler; late records of it are dropped.
    aborted_ = true;
    drop_record(s);
    ready_ = true;
    return Verdict::RequestReady;
  }
  if (h.is(Type::Params)) return params_record(s);
  if (h.is(Type::Stdin)) return stdin_record(s);
  return close(std::string("unexpected ") + records::type_name(h.type) +
               " record from the web server");
}

RecordGuard::Verdict RecordGuard::refuse_body() {
  return reject(400, "a body of " + std::to_string(body_size_) + " bytes for CONTENT_LENGTH " +
                         std::to_string(params_.content_length));
}

RecordGuard::Verdict RecordGuard::refuse_records() {
  return close("more than " + std::to_string(limits_.max_records) + " records in a request");
}

// A record of another request than the current one.
std::optional<RecordGuard::Verdict> RecordGuard::other_request_record(Scan& s) {
  const records::Header& h = s.header;
  const std::uint16_t id = h.request_id;
  // An abort of a request already ended, or the rest of a request ended by its abort.
  const bool late =
      request_id_ == 0 && (h.is(Type::AbortRequest) ||
                           (id == aborted_id_ && (h.is(Type::Params) || h.is(Type::Stdin))));
  // The records of a request refused with FCGI_CANT_MPX_CONN: inactive, so ignored.
  const bool refused =
      std::find(refused_ids_.begin(), refused_ids_.end(), id) != refused_ids_.end();
  if (late || refused) {
    drop_record(s);
    return std::nullopt;
  }
  return close(std::string(records::type_name(h.type)) + " record for request " +
               std::to_string(id) +
               (request_id_ ? ", while serving request " + std::to_string(request_id_)
                            : ", outside any request"));
}

std::optional<RecordGuard::Verdict> RecordGuard::params_record(Scan& s) {
  if (params_done_) return close("FCGI_PARAMS after the end of the params");
  const std::size_t length = s.header.content_length;
  if (length != 0) {
    params_records_.push_back(pos_ - request_begin_);
    pos_ += s.record;
    params_size_ += length;
    return std::nullopt;
  }
  strip_padding(s);
  pos_ += records::kHeaderSize;
  params_done_ = true;
  if (Verdict v = check_params(s.buf); v != Verdict::NeedMore) return v;
  return std::nullopt;
}

std::optional<RecordGuard::Verdict> RecordGuard::stdin_record(Scan& s) {
  if (!params_done_) return close("FCGI_STDIN before the end of the params");
  const std::size_t length = s.header.content_length;
  if (length == 0) return end_of_body(s.record);
  const long long content_length = params_.content_length;
  body_size_ += length;
  if (content_length >= 0 && body_size_ > static_cast<std::size_t>(content_length))
    return reject(400, "a body longer than CONTENT_LENGTH " + std::to_string(content_length));
  stdin_records_.push_back(pos_ - request_begin_);
  pos_ += s.record;
  return std::nullopt;
}

} // namespace fcgi_host
