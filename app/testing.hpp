#pragma once
// app::testing::CaptureSink: a body sink for unit tests of streaming handlers, called directly
// (no host): it records the head as it went out and every chunk.
//
//   app::testing::CaptureSink sink;
//   app::Response res;
//   res.reset(&sink);
//   handler.handle(request, res);
//   CHECK(sink.status == 200);
//   CHECK(sink.body == "expected stream");
//
// (Without any sink, Response::write() appends to Response::body, which is enough for tests that
// only look at the bytes.)
#include "app/response.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace app::testing {

class CaptureSink : public BodySink {
public:
  int heads_sent = 0;
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> chunks;
  std::string body;
  bool client_gone = false; // set to make send_body() report a vanished client

  void send_head(const Response& response) override {
    ++heads_sent;
    status = response.status;
    headers = response.headers;
  }
  bool send_body(std::string_view chunk) override {
    chunks.emplace_back(chunk);
    body.append(chunk);
    return !client_gone;
  }
};

} // namespace app::testing
