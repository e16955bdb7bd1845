// The request's content, parsed on demand: the body (spilled or not), query and form args,
// cookies, multipart parts, path parameters. Kept apart from request.cpp, which fills the request
// for every call and stays small.
#include "app/request.hpp"

#include "app/cookies.hpp"
#include "app/http_error.hpp"
#include "app/text.hpp"

namespace app {

void Request::set_body(std::string_view body) {
  body_.clear();
  reader_.restart();
  loaded_body_.clear();
  body_loaded_ = form_parsed_ = parts_parsed_ = false;
  expect_body(body.size());
  append_body(body.data(), body.size());
  finish_body();
}

const std::string& Request::body() const {
  if (!body_.spilled() && !stream_) return body_.memory();
  if (!body_loaded_) {
    if (stream_) {
      loaded_body_.clear();
      body_reader().read_all(loaded_body_); // the stored start (if not read yet) and the rest
    } else {
      loaded_body_ = body_.contents();
    }
    body_loaded_ = true;
  }
  return loaded_body_;
}

std::size_t Request::Reader::read(char* out, std::size_t size) {
  if (offset_ < request_->body_.size()) {
    const std::size_t n = request_->body_.read(offset_, out, size);
    offset_ += n;
    return n;
  }
  return request_->stream_ ? request_->stream_->read(out, size) : 0;
}

const Args& Request::query_args() const {
  if (!query_parsed_) {
    query_args_.parse(query());
    query_parsed_ = true;
  }
  return query_args_;
}

const Args& Request::form_args() const {
  if (!form_parsed_) {
    if (iequals(media_type(header("Content-Type")), "application/x-www-form-urlencoded"))
      form_args_.parse(body());
    else
      form_args_.clear();
    form_parsed_ = true;
  }
  return form_args_;
}

std::string_view Request::cookie(std::string_view name) const {
  return find_cookie(header("Cookie"), name).value_or(std::string_view{});
}

bool Request::has_cookie(std::string_view name) const {
  return find_cookie(header("Cookie"), name).has_value();
}

const std::vector<MultipartPart>& Request::multipart() const {
  if (parts_parsed_) return parts_;
  parts_.clear();
  std::string boundary = multipart_boundary(header("Content-Type"));
  if (!boundary.empty()) {
    MultipartLimits limits;
    limits.spill_threshold = body_.threshold();
    MultipartParser parser(boundary, limits);
    char chunk[64 * 1024];
    bool ok = true;
    // Through the reader: a streamed body is parsed as it arrives, never held whole.
    BodyReader& reader = body_reader();
    reader_.restart();
    for (std::size_t n; ok && (n = reader.read(chunk, sizeof chunk)) > 0;)
      ok = parser.feed(chunk, n);
    if (!parser.finish()) throw HttpError(400, "malformed multipart body: " + parser.error());
    parts_ = std::move(parser.parts());
  }
  parts_parsed_ = true;
  return parts_;
}

const MultipartPart* Request::part(std::string_view name) const {
  for (const MultipartPart& p : multipart())
    if (p.name == name) return &p;
  return nullptr;
}

std::string_view Request::path_param(std::string_view name) const {
  for (const PathParam& p : path_params_)
    if (p.name == name) return p.value;
  return {};
}

} // namespace app
