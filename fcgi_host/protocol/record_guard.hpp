#pragma once
// The host's side of the FastCGI boundary: every byte a client sends is framed and checked here
// before it is decoded (request_decoder.hpp; libfcgi, the reference decoder, must take whatever
// the guard lets through), because libfcgi 2.4.2 (the version Debian ships) aborts or leaks on
// hostile input:
//   - FCGI_GET_VALUES naming one variable several times overflows a fixed reply buffer (stack
//     smashing, SIGABRT), and with zero padding it never answers: the guard answers GET_VALUES
//     itself and libfcgi never sees a management record;
//   - PARAMS length fields near INT_MAX hit an allocation assertion (SIGABRT): pair lengths are
//     checked against the bytes really sent and against --max-params-size;
//   - every unknown management record leaks ~60 bytes: answered here with FCGI_UNKNOWN_TYPE;
//   - a pipelined second request can be lost inside libfcgi's read buffer: libfcgi is handed the
//     records of one request at a time, and what follows stays in the host's buffer.
// Pure logic over a byte buffer: no sockets, so it is unit-tested and fuzzed directly.
#include "fcgi_host/config/limits.hpp" // RequestLimits
#include "fcgi_host/protocol/param_scan.hpp"
#include "fcgi_host/protocol/records.hpp" // the encoders of what the host answers itself

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

// What the pool tells a client that asks with FCGI_GET_VALUES.
struct ServerValues {
  unsigned max_conns = 1;
  unsigned max_reqs = 1;
};

// What the decoder takes from the guard's reading of a request, beside its bytes.
struct RequestFraming {
  std::size_t body_size = 0;    // the STDIN bytes up to the empty record
  bool length_declared = false; // CONTENT_LENGTH was a number (and the body matched it); false
                                // when absent, empty or -1 (a body of unknown length)
  // The guard's one pass over the params (param_scan.hpp), which the decoder takes instead of
  // reading them again; null when the params were not scanned (a request built otherwise).
  const ScannedParams* params = nullptr;
  // Where the guard found the request's records, as offsets of their headers from the request's
  // first byte (request_begin()), in the order sent: the non-empty PARAMS and STDIN records. The
  // decoder takes the request from them instead of framing its records a second time.
  std::span<const std::size_t> params_records;
  std::span<const std::size_t> stdin_records;
  std::uint16_t request_id = 0;
  bool keep_conn = false;
  bool body_streamed = false; // the body goes on after these records (streamed_body())
};

class RecordGuard {
public:
  enum class Verdict {
    NeedMore,     // everything so far is valid; read more
    RequestReady, // [request_begin(), request_end()) holds one whole request for the decoder
    Reject,       // answer error_status() to request_id() (the host sends a short error page),
                  // then close the connection
    Close,        // protocol violation: close the connection, log close_reason()
  };

  RecordGuard(const RequestLimits& limits, const ServerValues& values)
      : limits_(limits), values_(values) {}

  // Scans buf[0, size) from where the last call stopped. May remove management records from
  // the buffer (shifting what follows, and reducing `size`), and appends the records the host
  // must send back (management answers, FCGI_END_REQUEST for refused requests) to `replies`.
  Verdict advance(char* buf, std::size_t& size, std::string& replies);

  // After RequestReady: the request is served; its bytes are dropped by the caller, which shifts
  // the buffer by request_end(). Resets the state for the next request on a kept connection.
  void consume_request();
  // As new, for another connection (the vectors keep their capacity).
  void reset();
  // After the params (params_done()), before the body ended: the rest of the body is read by
  // the handler as it arrives (protocol/stdin_stream.hpp), not framed here. The request is
  // ready now with the records framed so far, [request_begin(), request_end()); the caller
  // replaces what follows in the buffer by what remains after the body.
  void streamed_body() { ready_ = streamed_ = true; }

  std::size_t request_begin() const { return request_begin_; }
  std::size_t request_end() const { return pos_; }
  std::uint16_t request_id() const { return request_id_; }
  bool keep_connection() const { return keep_conn_; }
  bool in_request() const { return request_id_ != 0; }
  bool params_done() const { return params_done_; }
  // True when an FCGI_ABORT_REQUEST for the current request was seen. An abort before the end of
  // the request makes it ready at once (FastCGI 1.0, 5.4): the caller ends it, no handler runs.
  bool aborted() const { return aborted_; }
  int error_status() const { return error_status_; }
  const std::string& close_reason() const { return close_reason_; }
  std::size_t body_size() const { return body_size_; }
  RequestFraming framing() const {
    return {body_size_,
            params_.content_length >= 0,
            params_done_ ? &params_ : nullptr,
            params_records_,
            stdin_records_,
            request_id_,
            keep_conn_,
            streamed_};
  }

private:
  // The record whose header is at pos_, and the buffer it is in: what the steps of advance()
  // look at and may change (a record taken out shifts what follows and shrinks `size`).
  struct Scan {
    char* buf;
    std::size_t& size;
    std::string& replies;
    records::Header header;
    std::size_t record; // header, content and padding
  };
  const char* content(const Scan& s) const { return s.buf + pos_ + records::kHeaderSize; }
  // The usual request whole at once, in one step (record_guard.cpp says which); nullopt when
  // the bytes are anything else, with nothing changed: the steps below take them then.
  std::optional<Verdict> usual_request(char* buf, std::size_t size);
  // The steps of advance(), in order; each returns a verdict to stop with, or nullopt to scan on.
  std::optional<Verdict> while_ready(Scan& s);
  std::optional<Verdict> check_header(const Scan& s);
  std::optional<Verdict> next_record(Scan& s);
  std::optional<Verdict> other_request_record(Scan& s);
  std::optional<Verdict> params_record(Scan& s);
  std::optional<Verdict> stdin_record(Scan& s);
  Verdict end_of_body(std::size_t record);
  // Takes out bytes [at, at + n) of the buffer.
  static void take_out(Scan& s, std::size_t at, std::size_t n);
  void drop_record(Scan& s) { take_out(s, pos_, s.record); }
  void strip_padding(Scan& s);

  [[gnu::cold, gnu::noinline]] Verdict refuse_version(const Scan& s);
  [[gnu::cold, gnu::noinline]] Verdict refuse_size(records::Type stream);
  [[gnu::cold, gnu::noinline]] Verdict refuse_records();
  [[gnu::cold, gnu::noinline]] Verdict refuse_body(); // not the length CONTENT_LENGTH declared
  Verdict close(std::string reason);
  Verdict reject(int status, std::string reason);
  Verdict management_record(std::uint8_t type, const char* content, std::size_t length,
                            std::string& replies);
  Verdict begin_request(std::uint16_t id, const char* content, std::size_t length,
                        std::string& replies);
  Verdict check_params(const char* buf);
  Verdict refuse_params(const ParamScanResult& problem);

  RequestLimits limits_;
  ServerValues values_;
  std::size_t pos_ = 0; // next record header to scan
  std::size_t request_begin_ = 0;
  std::uint16_t request_id_ = 0; // 0: between requests
  std::uint16_t aborted_id_ = 0; // the last request, if its abort ended it: its late records
                                 // are dropped
  bool keep_conn_ = false;
  bool params_done_ = false;
  bool aborted_ = false;
  bool ready_ = false;    // RequestReady returned, consume_request() not yet called
  bool streamed_ = false; // streamed_body(): the body is read past the guard
  std::size_t params_size_ = 0;
  std::size_t body_size_ = 0;
  ScannedParams params_; // at the end of the params: what they are, where, and CONTENT_LENGTH
  std::size_t records_ = 0;
  std::size_t management_records_ = 0;
  // Offsets from request_begin_ of this request's non-empty PARAMS and STDIN records.
  std::vector<std::size_t> params_records_;
  std::vector<std::size_t> stdin_records_;
  // Requests refused with FCGI_CANT_MPX_CONN on this connection: their records are ignored.
  static constexpr std::size_t kMaxRefusedIds = 16;
  std::vector<std::uint16_t> refused_ids_;
  int error_status_ = 0;
  std::string close_reason_;
};

} // namespace fcgi_host
