/*
 * The libfcgi C contender of scripts/bench-workloads.sh: a plain FCGX_Accept_r loop under
 * spawn-fcgi (like bare_libfcgi.c, which stays the naive "OK" baseline) doing the same work as
 * work_plugin.cpp, work.php and work.psgi:
 *   /cpu?n=N  /io?ms=M  /upload  /download?mb=M   (see work_plugin.cpp)
 */
#include <fcgiapp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long arg(const char* query, const char* name, long fallback, long max) {
  size_t len = strlen(name);
  for (const char* p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
    if (strncmp(p, name, len) == 0 && p[len] == '=') {
      long v = strtol(p + len + 1, NULL, 10);
      return v < 0 ? 0 : v > max ? max : v;
    }
  }
  return fallback;
}

/* The benchmark's integer loop: the same in every language (see work_plugin.cpp). */
static uint64_t spin(long n) {
  uint64_t x = 1;
  for (long i = 0; i < n; ++i)
    x = (x * 1103515245u + 12345u) & 0x7fffffffu;
  return x;
}

int main(void) {
  static char buf[64 * 1024];
  FCGX_Request r;
  if (FCGX_Init() != 0 || FCGX_InitRequest(&r, 0, 0) != 0) return 1;
  memset(buf, 'd', sizeof buf);
  while (FCGX_Accept_r(&r) >= 0) {
    const char* path = FCGX_GetParam("SCRIPT_NAME", r.envp);
    const char* query = FCGX_GetParam("QUERY_STRING", r.envp);
    if (!path) path = "/";
    if (strcmp(path, "/cpu") == 0) {
      FCGX_FPrintF(r.out, "Content-Type: text/plain\r\n\r\n%llu\n",
                   (unsigned long long)spin(arg(query, "n", 0, 100000000)));
    } else if (strcmp(path, "/io") == 0) {
      long ms = arg(query, "ms", 5, 10000);
      struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
      FCGX_PutS("Content-Type: text/plain\r\n\r\nslept\n", r.out);
    } else if (strcmp(path, "/upload") == 0) {
      long total = 0;
      int n;
      while ((n = FCGX_GetStr(buf, sizeof buf, r.in)) > 0)
        total += n;
      memset(buf, 'd', sizeof buf);
      FCGX_FPrintF(r.out, "Content-Type: text/plain\r\n\r\n%ld\n", total);
    } else if (strcmp(path, "/download") == 0) {
      long mib = arg(query, "mb", 10, 1024);
      FCGX_FPrintF(r.out, "Content-Type: text/plain\r\nContent-Length: %ld\r\n\r\n", mib << 20);
      for (long i = 0; i < mib * 16; ++i)
        if (FCGX_PutStr(buf, sizeof buf, r.out) < 0) break;
    } else {
      FCGX_PutS("Content-Type: text/plain\r\n\r\nOK", r.out);
    }
  }
  return 0;
}
