#pragma once
// Descriptors a master inherits by accident: a shell or a supervisor that leaks an open file or
// socket (not close-on-exec) to the programs it starts. Workers are forked, not exec'd, so
// close-on-exec would not keep such an fd from a handler: it is closed at start.
#include <vector>

namespace process_manager {

// Closes every descriptor from 3 up that is not in `keep`; returns the numbers it closed.
std::vector<int> close_inherited_fds(std::vector<int> keep);

} // namespace process_manager
