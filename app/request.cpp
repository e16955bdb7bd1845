#include "app/request.hpp"

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

bool Request::release_large_buffers(std::size_t above) {
  bool released = body_.release(above);
  for (std::string* s : {&storage_, &loaded_body_}) {
    if (s->capacity() < above) continue;
    std::string().swap(*s);
    released = true;
  }
  return released;
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

} // namespace app
