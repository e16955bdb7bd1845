// The plugin ABI identity (app/plugin_abi.hpp) and the host's verdict on a plugin's table
// (runners/plugin.cpp): what differs is named, with what to do about it.
#include "app/plugin.hpp"
#include "fcgi_host/runners/plugin.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <string>
#include <string_view>

namespace {

struct AbiTable {
  std::array<std::uint32_t, app::plugin_abi::kLayout.size()> layout = app::plugin_abi::kLayout;
  fcgi_host_plugin plugin{FCGI_HOST_PLUGIN_ABI_VERSION,
                          static_cast<std::uint32_t>(app::plugin_abi::kLayout.size()),
                          nullptr,
                          "test",
                          [] { return static_cast<app::Handler*>(nullptr); },
                          [](app::Handler*) {},
                          0u};
  AbiTable() { plugin.layout = layout.data(); }
};

std::size_t index_of(std::string_view name) {
  for (std::size_t i = 0; i < app::plugin_abi::kLayoutNames.size(); ++i)
    if (app::plugin_abi::kLayoutNames[i] == name) return i;
  FAIL("no layout entry " << name);
  return 0;
}

} // namespace

TEST_SUITE("plugin abi") {

  TEST_CASE("a table compiled against these headers matches") {
    AbiTable t;
    CHECK(fcgi_host::plugin_abi_mismatch(t.plugin).empty());
  }

  TEST_CASE("another layout is refused, naming the first size that differs and the release") {
    AbiTable t;
    const std::size_t request = index_of("sizeof(app::Request)");
    t.layout[request] -= 40;
    std::string why = fcgi_host::plugin_abi_mismatch(t.plugin);
    CHECK(why.find("sizeof(app::Request) is " + std::to_string(t.layout[request]) +
                   " in the plugin") == 0);
    CHECK(why.find("rebuild the plugin against fcgi-host 0.") != std::string::npos);

    AbiTable lib;
    lib.layout[index_of("the C++ standard library")] = 2; // libc++
    CHECK(fcgi_host::plugin_abi_mismatch(lib.plugin).starts_with("the C++ standard library"));
  }

  TEST_CASE("headers whose declarations differ with every size the same are refused") {
    // A virtual function added to app::Handler: no size moves, the headers' hash does.
    AbiTable t;
    const std::size_t declarations =
        index_of("the hash of the handler API's declarations (its public headers)");
    CHECK(t.layout[declarations] == app::plugin_abi::kDeclarations);
    t.layout[declarations] ^= 1;
    const std::string why = fcgi_host::plugin_abi_mismatch(t.plugin);
    CHECK(why.starts_with("the hash of the handler API's declarations"));
    // In hex, as `fcgi-host --version` prints hashes.
    char ours[16];
    std::snprintf(ours, sizeof ours, "%08x", unsigned{app::plugin_abi::kDeclarations});
    CHECK_MESSAGE(why.find(std::string(ours) + " in this fcgi-host") != std::string::npos, why);
  }

  TEST_CASE("another table version, or a table without its layout, is refused") {
    AbiTable t;
    t.plugin.abi_version = 3;
    CHECK(fcgi_host::plugin_abi_mismatch(t.plugin).starts_with("its plugin table is version 3"));
    AbiTable short_layout;
    short_layout.plugin.layout_size = 3;
    CHECK(fcgi_host::plugin_abi_mismatch(short_layout.plugin).find("3 entries") !=
          std::string::npos);
  }

  TEST_CASE("the identity is one number printed by --version") {
    static_assert(app::plugin_abi::identity() != 0);
    CHECK(fcgi_host::plugin_abi_text().starts_with(std::to_string(FCGI_HOST_PLUGIN_ABI_VERSION) +
                                                   "-"));
  }
}
