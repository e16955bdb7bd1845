#include "fcgi_host/protocol/reference_decoder.hpp"

#include "fcgi_host/protocol/libfcgi_io.hpp"

#include <cstring>
#include <fcgiapp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {

ReferenceRequest decode_with_libfcgi(std::string_view records) {
  ReferenceRequest out;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return out;
  libfcgi_io::Source source;
  source.fd = pair[0];
  source.data = records.data();
  source.size = records.size();
  libfcgi_io::register_source(&source);
  FCGX_Request r;
  FCGX_InitRequest(&r, -1, 0);
  r.ipcFd = pair[0];
  r.keepConnection = 1; // FCGX_Accept_r first finishes the previous request: not a close
  out.accepted = FCGX_Accept_r(&r) == 0 && r.envp != nullptr;
  if (out.accepted) {
    for (char** p = r.envp; *p; ++p) {
      const char* eq = std::strchr(*p, '='); // libfcgi stores "NAME=VALUE"
      if (eq)
        out.params.emplace_back(std::string(*p, static_cast<std::size_t>(eq - *p)),
                                std::string(eq + 1));
    }
    char chunk[4096];
    for (int n; (n = FCGX_GetStr(chunk, sizeof chunk, r.in)) > 0;)
      out.body.append(chunk, static_cast<std::size_t>(n));
  }
  FCGX_Free(&r, 1); // reaches the host's OS_IpcClose
  out.closed_by_libfcgi = source.closed_by_libfcgi;
  libfcgi_io::unregister_source(&source);
  close(pair[0]);
  close(pair[1]);
  return out;
}

} // namespace fcgi_host
