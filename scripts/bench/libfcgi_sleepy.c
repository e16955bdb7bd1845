/*
 * The bare libfcgi loop of scripts/bench-hol.sh: scripts/bench/bare_libfcgi.c, plus a sleep of
 * delay_ms (from the query string) before answering, so that it can play the slow requests of
 * the head-of-line scenario. Started by spawn-fcgi -F W on fd 0.
 */
#include <fcgiapp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(void) {
  FCGX_Request r;
  if (FCGX_Init() != 0) return 1;
  if (FCGX_InitRequest(&r, 0, 0) != 0) return 1;
  while (FCGX_Accept_r(&r) >= 0) {
    const char* query = FCGX_GetParam("QUERY_STRING", r.envp);
    const char* delay = query ? strstr(query, "delay_ms=") : NULL;
    if (delay) {
      long ms = atol(delay + 9);
      struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    FCGX_PutS("Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nOK", r.out);
  }
  return 0;
}
