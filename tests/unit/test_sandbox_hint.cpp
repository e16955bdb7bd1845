// The boot-failure hint of a sandboxed worker (sandbox/sandbox_hint.cpp): it names the sandbox,
// the path the failure names when it is outside --sandbox-write, and the option that opens it;
// it stays out of failures that are not about files, and out of hosts without a sandbox.
#include "fcgi_host/sandbox/sandbox_hint.hpp"

#include <doctest/doctest.h>

#include <string>

using fcgi_host::sandbox_boot_hint;
using fcgi_host::SandboxMode;
using fcgi_host::SandboxSettings;

namespace {

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

SandboxSettings sandbox_on() {
  SandboxSettings s;
  s.mode = SandboxMode::On;
  s.write = {"/var/lib/app"};
  return s;
}

} // namespace

TEST_SUITE("sandbox boot hint") {
  TEST_CASE("a file error without a path: the sandbox, its write list and --sandbox-write DIR") {
    const std::string hint =
        sandbox_boot_hint(sandbox_on(), "on_thread_start: unable to open database file");
    INFO(hint);
    CHECK(hint.starts_with("; the worker booted inside its sandbox (--sandbox on"));
    CHECK(has(hint, "on_thread_start and the requests run in it"));
    CHECK(has(hint, "--sandbox-write (/var/lib/app)"));
    CHECK(has(hint, "a file elsewhere cannot be opened"));
    CHECK(has(hint, "--sandbox-write DIR"));
  }

  TEST_CASE("a path outside the write list is named, one inside it is not") {
    const std::string outside =
        sandbox_boot_hint(sandbox_on(), "open(\"/srv/data/todo.db\") failed: Permission denied");
    CHECK_MESSAGE(has(outside, "\"/srv/data/todo.db\" is not under --sandbox-write"), outside);
    const std::string inside =
        sandbox_boot_hint(sandbox_on(), "open(\"/var/lib/app/todo.db\") failed: Permission denied");
    CHECK_MESSAGE(!has(inside, "is not under"), inside);
    CHECK(has(inside, "a file elsewhere cannot be opened"));
    // A directory whose name only starts like a listed one is not under it.
    CHECK(has(sandbox_boot_hint(sandbox_on(), "open /var/lib/application/x: denied"),
              "\"/var/lib/application/x\" is not under"));
  }

  TEST_CASE("not about files, or no sandbox: no hint") {
    CHECK(sandbox_boot_hint(sandbox_on(), "database unreachable (test)").empty());
    CHECK(sandbox_boot_hint(sandbox_on(), "sandbox: no Landlock in this kernel").empty());
    CHECK(sandbox_boot_hint(SandboxSettings{}, "unable to open database file").empty());
  }

  TEST_CASE("--private-tmp alone: a path under /tmp is said to be hidden") {
    SandboxSettings s;
    s.private_tmp = true;
    CHECK(has(sandbox_boot_hint(s, "cannot open /tmp/todo.db: No such file or directory"),
              "/tmp is the pool's own (--private-tmp on)"));
    CHECK(sandbox_boot_hint(s, "cannot open /srv/todo.db: No such file or directory").empty());
  }
}
