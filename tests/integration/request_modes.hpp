#pragma once
// A request-path case runs in both modes of the worker (decision 21: one request path): once with
// --threads 1, where the handler runs inline on the worker's loop, and once with --threads 4,
// where it runs on a handler thread. A drift between the modes fails one of the two cases.
//
//   REQUEST_PATH_CASE("a 1 MiB body reaches the handler whole") {
//     HostProcess host(it::with_threads({"--app", "echo"}));
//     ...
//   }
// registers "a 1 MiB body reaches the handler whole (--threads 1)" and "... (--threads 4)".
#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace it {

// The mode of the case running now: 1 or 4 handler threads per worker.
inline unsigned& request_path_threads() {
  static unsigned threads = 1;
  return threads;
}

// `args` with the running case's --threads.
inline std::vector<std::string> with_threads(std::vector<std::string> args) {
  args.push_back("--threads");
  args.push_back(std::to_string(request_path_threads()));
  return args;
}

} // namespace it

#define IT_REQUEST_PATH_CAT2(a, b) a##b
#define IT_REQUEST_PATH_CAT(a, b) IT_REQUEST_PATH_CAT2(a, b)
#define IT_REQUEST_PATH_CASE(body, name)                                                           \
  static void body();                                                                              \
  TEST_CASE(name " (--threads 1)") {                                                               \
    it::request_path_threads() = 1;                                                                \
    body();                                                                                        \
  }                                                                                                \
  TEST_CASE(name " (--threads 4)") {                                                               \
    it::request_path_threads() = 4;                                                                \
    body();                                                                                        \
  }                                                                                                \
  static void body()
#define REQUEST_PATH_CASE(name)                                                                    \
  IT_REQUEST_PATH_CASE(IT_REQUEST_PATH_CAT(request_path_case_, __COUNTER__), name)
