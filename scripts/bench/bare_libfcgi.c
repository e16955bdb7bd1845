/*
 * The bare libfcgi baseline of scripts/bench.sh: the smallest "hello" a
 * FastCGI application can be with libfcgi, started by `spawn-fcgi -F W`,
 * which hands it the listening socket on fd 0. Every fcgi-host ratio in
 * docs/bench-results.md is measured against this loop (DESIGN.md §4), so it
 * must stay exactly this naive: no tuning, no extra headers.
 */
#include <fcgiapp.h>

int main(void) {
  FCGX_Request r;
  if (FCGX_Init() != 0) return 1;
  if (FCGX_InitRequest(&r, 0 /* the socket spawn-fcgi passed */, 0) != 0) return 1;
  while (FCGX_Accept_r(&r) >= 0) {
    FCGX_PutS("Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nOK", r.out);
  }
  return 0;
}
