// libFuzzer target: the record guard alone, fed a byte stream in chunks (the first input bytes
// pick the chunk sizes), with small limits, the way the worker feeds it. Checks after every step:
// the request range lies within the buffer, the buffer never grows past what the limits allow,
// every reply is a whole well-formed record of a type the guard may send, replies stay small,
// and each ready request is exactly BEGIN, PARAMS..., empty PARAMS, STDIN..., empty STDIN.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fcgi_host::GuardLimits limits = fuzz::small_limits();
  fuzz::feed(data, size, limits, [](const fcgi_host::RecordGuard&, std::string_view) {});
  return 0;
}
