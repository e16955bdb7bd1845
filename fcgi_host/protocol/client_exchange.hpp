#pragma once
// One FastCGI exchange from the client's side: send a whole request, then read records until
// its END_REQUEST, within a deadline. The `status`/`ping`/`reload`/`scale` commands, the pools'
// supervisor asking each pool's master, and `replay` all go through it.
#include "fcgi_host/net/connect.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fcgi_host {

// Why an exchange ended without an END_REQUEST: the call and the peer, or the deadline.
class ExchangeError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Each record of the answer, END_REQUEST last.
using OnRecord = std::function<void(const records::RecordView&)>;
// Asked whenever the deadline's poll has waited `poll_slice` without a byte: false gives up
// now with `why` set (a replayed worker that died, say).
using StillWaiting = std::function<bool(std::string& why)>;

// Sends `request` on the connected socket `fd` (`peer` names it in errors) and hands every
// record that comes back to `on_record` until an END_REQUEST. Throws ExchangeError.
void exchange(int fd, std::string_view peer, std::string_view request,
              SteadyClock::time_point deadline, const OnRecord& on_record,
              const StillWaiting& still_waiting = {});

// The usual case: the STDOUT stream of the answer.
std::string exchange_stdout(int fd, std::string_view peer, std::string_view request,
                            SteadyClock::time_point deadline);

} // namespace fcgi_host
