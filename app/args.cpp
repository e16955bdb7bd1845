#include "app/args.hpp"

#include "app/url_encoding.hpp"

namespace app {

void Args::clear() {
  storage_.clear();
  entries_.clear();
}

void Args::parse(std::string_view urlencoded) {
  clear();
  storage_.reserve(urlencoded.size());
  for_each_urlencoded_pair(urlencoded, [this](std::string_view name, std::string_view value) {
    Entry e;
    e.name.offset = storage_.size();
    percent_decode(name, true, storage_);
    e.name.size = storage_.size() - e.name.offset;
    e.value.offset = storage_.size();
    percent_decode(value, true, storage_);
    e.value.size = storage_.size() - e.value.offset;
    entries_.push_back(e);
  });
}

const Args::Entry* Args::find(std::string_view name) const {
  for (const Entry& e : entries_)
    if (view(e.name) == name) return &e;
  return nullptr;
}

std::string_view Args::get(std::string_view name) const {
  const Entry* e = find(name);
  return e ? view(e->value) : std::string_view{};
}

bool Args::has(std::string_view name) const {
  return find(name) != nullptr;
}

std::vector<std::string_view> Args::get_all(std::string_view name) const {
  std::vector<std::string_view> all;
  for (const Entry& e : entries_)
    if (view(e.name) == name) all.push_back(view(e.value));
  return all;
}

} // namespace app
