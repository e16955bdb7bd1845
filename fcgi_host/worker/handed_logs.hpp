#pragma once
// The host's two logs across a rotation (process_manager/log_handover.hpp): which descriptors
// the master hands its workers after USR1, and how a worker puts them in place. One file for
// both sides, so the order of the descriptors is agreed in one place.
#include <vector>

namespace fcgi_host {

// The master, after reopening: the error log's and the access log's descriptors (-1: not
// logging to a file).
std::vector<int> logs_to_hand();

// A worker, on USR1 and as its loop begins: takes what the master handed on `channel` and swaps
// it in; without a channel (-1) it reopens the files itself (a worker of the master's own user,
// or a host without a master).
void take_handed_logs(int channel);

} // namespace fcgi_host
