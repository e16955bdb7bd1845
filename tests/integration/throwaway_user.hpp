#pragma once
// A local user made for one test and removed after it (useradd, userdel): the workers' user in
// the tests of what a root master keeps from them. Without root, or without useradd, none is
// made and why_not() says why (the test reports a CTest skip).
#include "commands.hpp"

#include <atomic>
#include <string>
#include <unistd.h>

namespace it {

class ThrowawayUser {
public:
  ThrowawayUser() {
    if (::geteuid() != 0) {
      why_not_ = "not root: no throwaway user can be made";
      return;
    }
    static std::atomic<int> made{0};
    const std::string name = "fcgi-t" + std::to_string(::getpid()) + "-" + std::to_string(++made);
    Command add = run_shell("useradd --system --no-create-home --shell /usr/sbin/nologin " + name);
    if (add.status != 0) {
      why_not_ = "useradd failed: " + add.output;
      return;
    }
    name_ = name;
  }
  ~ThrowawayUser() {
    if (!name_.empty()) run_shell("userdel " + name_);
  }
  ThrowawayUser(const ThrowawayUser&) = delete;
  ThrowawayUser& operator=(const ThrowawayUser&) = delete;

  bool made() const { return !name_.empty(); }
  const std::string& name() const { return name_; }
  const std::string& why_not() const { return why_not_; }

private:
  std::string name_;
  std::string why_not_;
};

} // namespace it
