#include "app/request.hpp"

#include "app/cookies.hpp"
#include "app/http_error.hpp"
#include "app/text.hpp"

#include <cctype>

namespace app {
namespace {

char header_char(char c) {
  if (c == '-') return '_';
  if (c >= 'a' && c <= 'z') return static_cast<char>(c - 'a' + 'A');
  return c;
}

// True when the CGI variable `var` ("HTTP_X_ID") names the HTTP header `name` ("x-id").
bool names_header(std::string_view var, std::string_view name) {
  if (var.size() != name.size()) return false;
  for (std::size_t i = 0; i < var.size(); ++i)
    if (var[i] != header_char(name[i])) return false;
  return true;
}

} // namespace

void Request::clear() {
  storage_.clear();
  entries_.clear();
  method_ = uri_ = path_ = query_ = Span{};
  body_.clear();
  abort_probe_ = nullptr;
  abort_context_ = nullptr;
  loaded_body_.clear();
  body_loaded_ = false;
  query_parsed_ = form_parsed_ = parts_parsed_ = false;
  parts_.clear();
  path_params_.clear();
  decoded_params_.clear();
  route_ = "(handler)";
}

void Request::set_body(std::string_view body) {
  body_.clear();
  loaded_body_.clear();
  body_loaded_ = form_parsed_ = parts_parsed_ = false;
  expect_body(body.size());
  append_body(body.data(), body.size());
  finish_body();
}

const std::string& Request::body() const {
  if (!body_.spilled()) return body_.memory();
  if (!body_loaded_) {
    loaded_body_ = body_.contents();
    body_loaded_ = true;
  }
  return loaded_body_;
}

Request::Span Request::store(std::string_view text) {
  Span s{storage_.size(), text.size()};
  storage_.append(text);
  return s;
}

void Request::add_param(std::string_view name, std::string_view value) {
  Entry e;
  e.name = store(name);
  e.value = store(value);
  entries_.push_back(e);
}

const Request::Entry* Request::find(std::string_view name) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (view(it->name) == name) return &*it;
  return nullptr;
}

std::string_view Request::param(std::string_view name) const {
  const Entry* e = find(name);
  return e ? view(e->value) : std::string_view{};
}

bool Request::has_param(std::string_view name) const {
  return find(name) != nullptr;
}

Request::Param Request::param_at(std::size_t i) const {
  return {view(entries_[i].name), view(entries_[i].value)};
}

void Request::finish_params() {
  auto span_of = [this](std::string_view name) {
    const Entry* e = find(name);
    return e ? e->value : Span{};
  };
  method_ = span_of("REQUEST_METHOD");
  query_ = span_of("QUERY_STRING");
  uri_ = span_of("REQUEST_URI");
  if (uri_.size == 0) uri_ = span_of("SCRIPT_NAME"); // CGI servers without REQUEST_URI
  path_ = uri_;
  std::string_view u = view(uri_);
  if (auto q = u.find('?'); q != std::string_view::npos) path_.size = q;
}

std::string_view Request::header(std::string_view name) const {
  if (names_header("CONTENT_TYPE", name) || names_header("CONTENT_LENGTH", name))
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (names_header(view(it->name), name)) return view(it->value);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    std::string_view var = view(it->name);
    if (var.size() > 5 && var.substr(0, 5) == "HTTP_" && names_header(var.substr(5), name))
      return view(it->value);
  }
  return {};
}

void Request::for_each_header(
    const std::function<void(std::string_view, std::string_view)>& fn) const {
  for (const Entry& e : entries_) {
    std::string_view var = view(e.name);
    if (var.size() > 5 && var.substr(0, 5) == "HTTP_") fn(var, view(e.value));
  }
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
    for (std::size_t offset = 0, n; ok && (n = body_.read(offset, chunk, sizeof chunk)) > 0;
         offset += n)
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
