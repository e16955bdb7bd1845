#pragma once
// The plugin ABI identity: what a plugin was compiled against, as numbers the compiler computes
// from the types that cross the boundary, and the same numbers in the host. Nothing here is
// bumped by hand: a change to app::Request, app::Response, app::Handler, the plugin table, the
// standard library's ABI or the compiler family changes a number, and the host refuses the
// plugin before any of its handler code runs, naming the first number that differs.
//
// A change that keeps every size (a virtual function added to app::Handler, a member function
// of Request or Response changed) changes the last number: the hash of the handler API's
// declarations (app/plugin_abi_declarations.hpp, written from the public headers by
// cmake/plugin_abi_declarations.cmake, kept true by a test).
#include "app/handler.hpp"
#include "app/plugin_abi_declarations.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace app::plugin_abi {

// What each number of kLayout measures, in order (the host's error line names it).
inline constexpr std::array kLayoutNames = {
    "sizeof(app::Request)",
    "alignof(app::Request)",
    "sizeof(app::Request::Param)",
    "sizeof(app::Response)",
    "alignof(app::Response)",
    "sizeof(app::FileOffload)",
    "sizeof(app::Handler)",
    "sizeof(app::SpillBuffer)",
    "sizeof(app::Args)",
    "sizeof(std::string)",
    "sizeof(std::string_view)",
    "sizeof(std::vector)",
    "sizeof(std::deque)",
    "sizeof(std::function)",
    "sizeof(std::optional<std::string>)",
    "the C++ standard library",
    "the standard library's string ABI (_GLIBCXX_USE_CXX11_ABI)",
    "the compiler family",
    "sizeof(void*)",
    "the hash of the handler API's declarations (its public headers)"};

// 1: libstdc++, 2: libc++, 3: another.
inline constexpr std::uint32_t standard_library() {
#if defined(_LIBCPP_VERSION)
  return 2;
#elif defined(__GLIBCXX__)
  return 1;
#else
  return 3;
#endif
}

inline constexpr std::uint32_t string_abi() {
#if defined(_GLIBCXX_USE_CXX11_ABI)
  return _GLIBCXX_USE_CXX11_ABI ? 11 : 98;
#else
  return 0;
#endif
}

// GCC and Clang share the Itanium C++ ABI on Linux: one family. 2: MSVC, 3: another.
inline constexpr std::uint32_t compiler_family() {
#if defined(__GNUC__) || defined(__clang__)
  return 1;
#elif defined(_MSC_VER)
  return 2;
#else
  return 3;
#endif
}

// Not inline: each translation unit has its own copy (internal linkage). A plugin's pointer to
// it must not be bound to the host's copy, which an inline variable exported by the executable
// would be.
constexpr std::array<std::uint32_t, kLayoutNames.size()> kLayout = {
    sizeof(Request),
    alignof(Request),
    sizeof(Request::Param),
    sizeof(Response),
    alignof(Response),
    sizeof(FileOffload),
    sizeof(Handler),
    sizeof(SpillBuffer),
    sizeof(Args),
    sizeof(std::string),
    sizeof(std::string_view),
    sizeof(std::vector<int>),
    sizeof(std::deque<int>),
    sizeof(std::function<void()>),
    sizeof(std::optional<std::string>),
    standard_library(),
    string_abi(),
    compiler_family(),
    sizeof(void*),
    kDeclarations,
};

// One number for the whole identity (FNV-1a over kLayout): what `fcgi-host --version` prints.
inline constexpr std::uint32_t identity() {
  std::uint32_t h = 2166136261u;
  for (std::uint32_t v : kLayout)
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 16777619u;
    }
  return h;
}

} // namespace app::plugin_abi
