#pragma once
// app::Args: decoded name/value pairs of a query string or a form body, in arrival order, names
// may repeat ("x=1&x=2"). Storage is one string and one vector, reused from request to request.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace app {

class Args {
public:
  struct Arg {
    std::string_view name;
    std::string_view value;
  };

  // Replaces the content with the decoded pairs of `urlencoded` ('+' is a space).
  void parse(std::string_view urlencoded);
  void clear();

  // The first value of `name`; empty when absent (has() tells "a=" from no "a").
  std::string_view get(std::string_view name) const;
  bool has(std::string_view name) const;
  // Every value of `name`, in order.
  std::vector<std::string_view> get_all(std::string_view name) const;
  std::size_t size() const { return entries_.size(); }
  Arg at(std::size_t i) const { return {view(entries_[i].name), view(entries_[i].value)}; }

private:
  struct Span {
    std::size_t offset = 0, size = 0;
  };
  struct Entry {
    Span name, value;
  };
  std::string_view view(Span s) const { return {storage_.data() + s.offset, s.size}; }
  const Entry* find(std::string_view name) const;

  std::string storage_;
  std::vector<Entry> entries_;
};

} // namespace app
