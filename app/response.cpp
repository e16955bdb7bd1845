#include "app/response.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace app {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

} // namespace

void Response::set_header(std::string_view name, std::string_view value) {
  for (auto& [n, v] : headers)
    if (iequals(n, name)) {
      v.assign(value);
      return;
    }
  add_header(name, value);
}

void Response::add_header(std::string_view name, std::string_view value) {
  headers.emplace_back(std::string(name), std::string(value));
}

std::string_view Response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return {};
}

void Response::set_content(std::string_view content, std::string_view content_type) {
  body.assign(content);
  set_header("Content-Type", content_type);
}

bool Response::write(std::string_view chunk) {
  if (!sink_) throw std::logic_error("Response::write: no body sink (not served by a host)");
  if (!head_sent_) {
    sink_->send_head(*this);
    head_sent_ = true;
  }
  return chunk.empty() || sink_->send_body(chunk);
}

void Response::reset(BodySink* sink) {
  status = 200;
  headers.clear();
  body.clear();
  sink_ = sink;
  head_sent_ = false;
}

std::string_view reason_phrase(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 204:
    return "No Content";
  case 206:
    return "Partial Content";
  case 301:
    return "Moved Permanently";
  case 302:
    return "Found";
  case 303:
    return "See Other";
  case 304:
    return "Not Modified";
  case 307:
    return "Temporary Redirect";
  case 308:
    return "Permanent Redirect";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 409:
    return "Conflict";
  case 410:
    return "Gone";
  case 411:
    return "Length Required";
  case 413:
    return "Content Too Large";
  case 414:
    return "URI Too Long";
  case 415:
    return "Unsupported Media Type";
  case 422:
    return "Unprocessable Content";
  case 429:
    return "Too Many Requests";
  case 500:
    return "Internal Server Error";
  case 501:
    return "Not Implemented";
  case 502:
    return "Bad Gateway";
  case 503:
    return "Service Unavailable";
  case 504:
    return "Gateway Timeout";
  default:
    return "Unknown";
  }
}

} // namespace app
