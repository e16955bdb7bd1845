#pragma once
// What `fcgi-host reload` and `fcgi-host scale` ask a master over its --status-listen socket
// (POST /control/VERB; StatusServer lets only the master's user or root through).
//   reload            as HUP: a new generation from the config file read again
//   scale?workers=N   the current generation's workers (dynamic, ondemand: the most) set to N
#include "fcgi_host/observe/status_page.hpp"
#include "process_manager/master.hpp"

#include <string_view>

namespace fcgi_host {

EndpointReply control_master(process_manager::Master& master, std::string_view verb,
                             std::string_view args);

} // namespace fcgi_host
