#pragma once
// A command line for execv() or an argc/argv parser, built from words: the words are kept here,
// so the pointers stay valid as long as this object does.
#include <string>
#include <vector>

namespace process_manager {

class Argv {
public:
  explicit Argv(std::vector<std::string> words) : words_(std::move(words)) {
    for (std::string& w : words_)
      pointers_.push_back(w.data());
    pointers_.push_back(nullptr);
  }
  Argv(const Argv&) = delete;
  Argv& operator=(const Argv&) = delete;

  char** data() { return pointers_.data(); } // null-terminated, as execv() wants
  const char** cdata() { return const_cast<const char**>(pointers_.data()); }
  int argc() const { return static_cast<int>(words_.size()); }

private:
  std::vector<std::string> words_;
  std::vector<char*> pointers_;
};

} // namespace process_manager
