#pragma once
// app::Response: status, headers and body. A handler either fills `body` (the host sends it after
// the handler returns) or streams: each write() sends the head first, then the chunk, so a large
// body never has to be held in memory.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace app {

class Response;

// Where a streaming response goes. The host implements it; tests can implement it to capture.
class BodySink {
public:
  virtual ~BodySink() = default;
  virtual void send_head(const Response& response) = 0;
  // Returns false when the client is gone (the handler may stop producing).
  virtual bool send_body(std::string_view chunk) = 0;
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

  // Streaming: sends the head (status and headers, once) and then `chunk` at once. After the
  // first write, status and headers can no longer change and `body` is not used.
  bool write(std::string_view chunk);
  bool head_sent() const { return head_sent_; }

  // Host side.
  void reset(BodySink* sink);
  void mark_head_sent() { head_sent_ = true; }

private:
  BodySink* sink_ = nullptr;
  bool head_sent_ = false;
};

// "OK", "Not Found", ... for a status code; "Unknown" for codes without a standard phrase.
std::string_view reason_phrase(int status);

} // namespace app
