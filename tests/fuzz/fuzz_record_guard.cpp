// libFuzzer target: the record guard alone, fed a byte stream in chunks (the first input bytes
// pick the chunk sizes), with small limits, the way the worker feeds it. Checks after every step:
// the request range lies within the buffer, the buffer never grows past what the limits allow,
// every reply is a whole well-formed record of a type the guard may send, replies stay small,
// and each ready request is exactly BEGIN, PARAMS..., empty PARAMS, STDIN..., empty STDIN.
// The same bytes also go through the codec's record reader (in the same chunks) and its
// name-value decoder: the reader frames the same records whatever the cut, and no decoded pair
// lies outside its record.
#include "fuzz_common.hpp"

namespace {

void check_codec(const std::uint8_t* data, std::size_t size) {
  fuzz::Chunker chunker(data, size);
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view whole = input; // framed at once, as the reference
  fcgi_host::records::RecordReader reader;
  for (std::size_t at = 0; at < input.size();) {
    std::size_t n = chunker.next(input.size() - at);
    reader.append(input.substr(at, n));
    at += n;
    for (fcgi_host::records::RecordView r; reader.next(r);) {
      fcgi_host::records::RecordView expected;
      FUZZ_CHECK(fcgi_host::records::take_record(whole, expected));
      FUZZ_CHECK(r.header.type == expected.header.type && r.content == expected.content &&
                 r.header.padding == expected.header.padding);
      std::string_view pairs = r.content;
      for (fcgi_host::records::NameValue pair;;) {
        std::size_t before = pairs.size();
        auto status = fcgi_host::records::next_name_value(pairs, pair);
        if (status != fcgi_host::records::PairStatus::Pair) {
          FUZZ_CHECK(pairs.size() == before);
          break;
        }
        FUZZ_CHECK(pair.name.size() + pair.value.size() + 2 <= before - pairs.size());
        FUZZ_CHECK(pair.name.data() >= r.content.data() &&
                   pair.value.data() + pair.value.size() <= r.content.data() + r.content.size());
      }
    }
  }
  fcgi_host::records::RecordView extra;
  FUZZ_CHECK(!fcgi_host::records::take_record(whole, extra));
  FUZZ_CHECK(reader.rest() == whole);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fcgi_host::RequestLimits limits = fuzz::small_limits();
  fuzz::feed(data, size, limits, [](const fcgi_host::RecordGuard&, std::string_view) {});
  check_codec(data, size);
  return 0;
}
