#include "app/multipart.hpp"

#include "app/text.hpp"
#include "app/url_encoding.hpp"

#include <algorithm>
#include <cctype>

namespace app {
namespace {

// Calls fn(name, value) for each `; name=value` parameter after the first item of a header
// value (Content-Type, Content-Disposition). Quoted values lose their quotes and backslashes;
// a ';' inside quotes does not split.
template <class Fn> void for_each_header_param(std::string_view value, Fn&& fn) {
  std::size_t i = value.find(';');
  while (i != std::string_view::npos && i < value.size()) {
    ++i; // past ';'
    std::size_t eq = value.find('=', i);
    std::size_t semi = value.find(';', i);
    if (eq == std::string_view::npos || (semi != std::string_view::npos && semi < eq)) {
      i = semi;
      continue;
    }
    std::string_view name = trim_blanks(value.substr(i, eq - i));
    std::size_t v = eq + 1;
    while (v < value.size() && (value[v] == ' ' || value[v] == '\t'))
      ++v;
    std::string text;
    if (v < value.size() && value[v] == '"') {
      for (++v; v < value.size() && value[v] != '"'; ++v) {
        if (value[v] == '\\' && v + 1 < value.size()) ++v;
        text.push_back(value[v]);
      }
      i = value.find(';', v);
    } else {
      i = value.find(';', v);
      text = trim_blanks(
          value.substr(v, i == std::string_view::npos ? std::string_view::npos : i - v));
    }
    fn(name, std::move(text));
  }
}

} // namespace

std::string_view MultipartPart::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return {};
}

std::string multipart_boundary(std::string_view content_type) {
  std::string_view type = media_type(content_type);
  if (type.size() < 10 || !iequals(type.substr(0, 10), "multipart/")) return {};
  std::string boundary;
  for_each_header_param(content_type, [&](std::string_view name, std::string value) {
    if (boundary.empty() && iequals(name, "boundary")) boundary = std::move(value);
  });
  // RFC 2046: 1 to 70 characters.
  if (boundary.size() > 70) return {};
  return boundary;
}

MultipartParser::MultipartParser(std::string_view boundary, MultipartLimits limits)
    : delimiter_("\r\n--" + std::string(boundary)), limits_(limits) {
  // The first delimiter may open the body without a CRLF before it: pretend there was one.
  pending_ = "\r\n";
  if (boundary.empty()) fail("no multipart boundary");
}

bool MultipartParser::fail(std::string why) {
  state_ = State::Failed;
  error_ = std::move(why);
  pending_.clear();
  return false;
}

bool MultipartParser::parse_headers(std::string_view block) {
  MultipartPart& part = parts_.back();
  while (!block.empty()) {
    std::size_t end = block.find("\r\n");
    std::string_view line = block.substr(0, end);
    block.remove_prefix(end == std::string_view::npos ? block.size() : end + 2);
    if (line.empty()) continue;
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail("a part header without ':'");
    part.headers.emplace_back(std::string(trim_blanks(line.substr(0, colon))),
                              std::string(trim_blanks(line.substr(colon + 1))));
  }
  std::string_view disposition = part.header("Content-Disposition");
  bool extended_name = false;
  for_each_header_param(disposition, [&](std::string_view name, std::string value) {
    if (iequals(name, "name")) {
      part.name = std::move(value);
    } else if (iequals(name, "filename") && !extended_name) {
      part.filename = std::move(value);
    } else if (iequals(name, "filename*") && value.size() > 7 &&
               iequals(std::string_view(value).substr(0, 7), "UTF-8''")) {
      part.filename = percent_decode(std::string_view(value).substr(7));
      extended_name = true;
    }
  });
  part.content_type = std::string(part.header("Content-Type"));
  return true;
}

// Consumes as much of pending_ as the state machine can; leaves what needs more bytes.
void MultipartParser::step() {
  std::size_t pos = 0;
  for (bool progress = true; progress;) {
    progress = false;
    std::string_view rest = std::string_view(pending_).substr(pos);
    switch (state_) {
    case State::Preamble: {
      std::size_t at = rest.find(delimiter_);
      if (at == std::string_view::npos) {
        // Keep what could be the start of a delimiter.
        if (rest.size() >= delimiter_.size()) pos += rest.size() - (delimiter_.size() - 1);
        break;
      }
      pos += at + delimiter_.size();
      state_ = State::AfterDelimiter;
      progress = true;
      break;
    }
    case State::AfterDelimiter: {
      std::size_t blanks = 0; // transport padding after the boundary
      while (blanks < rest.size() && (rest[blanks] == ' ' || rest[blanks] == '\t'))
        ++blanks;
      if (rest.size() < blanks + 2) break;
      std::string_view next = rest.substr(blanks, 2);
      if (next == "--") {
        state_ = State::Done;
        pos = pending_.size();
        break;
      }
      if (next != "\r\n") {
        fail("a boundary followed by neither CRLF nor \"--\"");
        return;
      }
      if (parts_.size() >= limits_.max_parts) {
        fail("too many multipart parts");
        return;
      }
      parts_.emplace_back();
      parts_.back().data.set_threshold(limits_.spill_threshold);
      pos += blanks + 2;
      state_ = State::Headers;
      progress = true;
      break;
    }
    case State::Headers: {
      std::size_t end = rest.starts_with("\r\n") ? 0 : rest.find("\r\n\r\n");
      if (end == std::string_view::npos) {
        // The blank line may have begun in the last 3 bytes: only past that is it too large,
        // so that where the body was cut into pieces never changes the verdict.
        if (rest.size() > limits_.max_header_bytes + 3)
          fail("a multipart part header is too large");
        break;
      }
      if (end > limits_.max_header_bytes) {
        fail("a multipart part header is too large");
        return;
      }
      if (!parse_headers(rest.substr(0, end))) return;
      pos += end == 0 ? 2 : end + 4;
      state_ = State::Data;
      progress = true;
      break;
    }
    case State::Data: {
      std::size_t at = rest.find(delimiter_);
      SpillBuffer& data = parts_.back().data;
      if (at == std::string_view::npos) {
        if (rest.size() >= delimiter_.size()) {
          std::size_t safe = rest.size() - (delimiter_.size() - 1);
          data.append(rest.data(), safe);
          pos += safe;
        }
        break;
      }
      data.append(rest.data(), at);
      pos += at + delimiter_.size();
      state_ = State::AfterDelimiter;
      progress = true;
      break;
    }
    case State::Done:
      pos = pending_.size(); // the epilogue
      break;
    case State::Failed:
      return;
    }
  }
  pending_.erase(0, pos);
}

bool MultipartParser::feed(const char* data, std::size_t size) {
  if (state_ == State::Failed) return false;
  if (state_ == State::Done) return true;
  pending_.append(data, size);
  step();
  return state_ != State::Failed;
}

bool MultipartParser::finish() {
  if (state_ == State::Failed) return false;
  if (state_ != State::Done) return fail("the multipart body ends before its closing boundary");
  return true;
}

} // namespace app
