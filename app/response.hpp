#pragma once
// app::Response: status, headers and body. A handler either fills `body` (the host sends it after
// the handler returns) or streams: each write() sends the head first, then the chunk, so a large
// body never has to be held in memory.
#include "app/cookies.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace app {

class Response;

// How Response::send_file() answers: the front server in use sends the file itself when told by
// a header (the host's --send-file-mode and --x-accel-prefix), or the host streams it.
struct FileOffload {
  enum class Mode {
    Stream,         // the host reads the file and sends its bytes
    XAccelRedirect, // nginx: "X-Accel-Redirect: <prefix><path>", to an `internal` location
    XSendfile,      // Apache mod_xsendfile, lighttpd "x-sendfile": "X-Sendfile: <path>"
  };
  Mode mode = Mode::Stream;
  std::string prefix = "/internal"; // X-Accel-Redirect: the internal location the path goes under
};

// Where a streaming response goes. The host implements it; tests can implement it to capture.
class BodySink {
public:
  virtual ~BodySink() = default;
  virtual void send_head(const Response& response) = 0;
  // Returns false when the client is gone (the handler may stop producing).
  virtual bool send_body(std::string_view chunk) = 0;
  // Sends what send_body() buffered now; false when the client is gone.
  virtual bool flush() { return true; }
};

class EventStream;

// The host's side of Response::finish(): it ends the response on the wire at once (the worker's
// lane implements it). A handler never implements it.
class ResponseEnd {
public:
  virtual ~ResponseEnd() = default;
  virtual void end_response(Response& response) = 0;
};

class Response {
public:
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // Replaces a header of that name (case-insensitive) or adds it.
  void set_header(std::string_view name, std::string_view value);
  // Adds a header even if one of that name exists (Set-Cookie).
  void add_header(std::string_view name, std::string_view value);
  std::string_view header(std::string_view name) const;
  void set_content(std::string_view content, std::string_view content_type);

  // Adds a Set-Cookie header (Cookie::to_header() checks it; throws std::invalid_argument).
  void set_cookie(const Cookie& cookie);
  // Asks the client to delete a cookie: empty value, Max-Age=0, same Path.
  void clear_cookie(std::string_view name, std::string_view path = "/");
  // status 301, 302, 303, 307 or 308 and a Location header, a short body. Throws
  // std::invalid_argument for another status or a location holding CR, LF or NUL.
  void redirect(std::string_view location, int status = 302);

  // Answers with the file at `path`, an absolute path: status 200, Content-Type by its extension
  // (app/content_types.hpp), and its bytes (Content-Length, streamed when large) or the front
  // server's offload header and no body, by the host's FileOffload mode. 404 when it is not a
  // regular file that can be read. The handler owns the trust in `path`: send_file serves any
  // file the worker may read, wherever it is; it only refuses (std::invalid_argument, a 500) a
  // relative path, a "." or ".." segment, and CR, LF or NUL, so that the path the front server
  // resolves is the one the handler checked. Returns false when the client went away.
  bool send_file(std::string_view path);

  // Streaming: sends the head (status and headers, once) and then `chunk` at once. After the
  // first write, status and headers can no longer change and `body` is not used. For a status
  // without content (1xx, 204, 304) the chunks are dropped, as for HEAD.
  // Without a sink (a handler called directly in a unit test) the head is marked sent and the
  // chunks are appended to `body`, so a test can read what was streamed (app/testing.hpp has a
  // sink that also records the head).
  bool write(std::string_view chunk);
  // Sends what write() buffered at once (a chunk that must reach the client now, not with the
  // next 8 KiB); false when the client is gone.
  bool flush();
  // Server-sent events: sets Content-Type: text/event-stream, Cache-Control: no-cache and
  // X-Accel-Buffering: no (nginx then passes each event on as it comes), sends the head, and
  // returns the stream to send events on. With --threads a stream holds one handler thread,
  // not a process. docs/threads.md says what nginx needs.
  EventStream event_stream();
  // True once the head went out: from then on a failure can only cut the body short, and the
  // host must abort the response rather than end it cleanly.
  bool head_sent() const { return head_sent_; }

  // Ends the response now, while handle() goes on: the rest of the head and body go out, then
  // the end of the request, and the web server's connection is free for its next request. The
  // worker (or the handler thread) stays busy until handle() returns, and --request-timeout
  // covers the whole; work after it is for what the client need not wait for (an audit record,
  // a cache fill, a notification). A second finish(), and a write() or flush() after it, are
  // ignored (write() returns false) and logged once. Changes to status, headers or body after
  // it reach nobody. Without a host (a direct unit test) it only marks the response finished.
  void finish();
  bool finished() const { return finished_; }
  // Something was written or finished after finish() (the host logs it once).
  bool used_after_finish() const { return used_after_finish_; }

  // For a HEAD request served by a GET route: write() sends the head but drops body bytes.
  void set_head_only(bool head_only) { head_only_ = head_only; }
  bool head_only() const { return head_only_; }

  // Status 200, no headers, no body (keeps the sink); for error handlers, before the head went out.
  void clear();

  // Host side.
  void reset(BodySink* sink);
  // How send_file() answers (kept across reset(); nullptr: stream).
  void set_file_offload(const FileOffload* offload) { offload_ = offload; }
  void mark_head_sent() { head_sent_ = true; }
  // What finish() calls (kept across reset(); nullptr: finish() only marks the response).
  void set_end(ResponseEnd* end) { end_ = end; }

private:
  BodySink* sink_ = nullptr;
  const FileOffload* offload_ = nullptr;
  ResponseEnd* end_ = nullptr;
  bool head_sent_ = false;
  bool head_only_ = false;
  bool finished_ = false;
  bool used_after_finish_ = false;
};

// Events of a text/event-stream response (Response::event_stream()), each sent at once. A
// client gone makes send() and heartbeat() return false: the handler ends the stream then.
class EventStream {
public:
  explicit EventStream(Response& response) : response_(response) {}
  // "event: <event>", "id: <id>" when given, a "data:" line per line of `data`, a blank line.
  bool send(std::string_view data, std::string_view event = {}, std::string_view id = {});
  // A comment line (": <text>"): keeps an idle stream open past the proxies' read timeouts
  // (nginx's fastcgi_read_timeout: 60 s). With --threads above 1 the host sends one itself on
  // a stream quiet for --event-heartbeat (default kHeartbeatEverySeconds); with one thread a
  // handler that waits for its next event calls it about that often.
  bool heartbeat(std::string_view text = "heartbeat");
  static constexpr int kHeartbeatEverySeconds = 15;

private:
  Response& response_;
};

// 1xx, 204 and 304 carry no body (RFC 9110 6.4.1), so the host writes neither the body nor a
// Content-Length for them (8.6: none at all for 1xx and 204; for 304 only the handler's own, the
// length a 200 would have had). Callers test `status != 200` first: the usual answer pays one
// compare.
constexpr bool status_without_content(int status) {
  return status < 200 || status == 204 || status == 304;
}

// The reason phrase of a status code: the registered one ("Not Found", "I'm a teapot" too), else
// one by class ("Client Error" for an unregistered 4xx; "Nonstandard Status" outside 100-599).
std::string_view reason_phrase(int status);

} // namespace app
