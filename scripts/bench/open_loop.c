/*
 * open-loop: the overload generator of scripts/bench-workloads.sh. Requests arrive at a fixed
 * rate whatever the answers (an open loop, as real users do), each with a client timeout after
 * which the client gives up and closes its connection.
 *
 * Why not h2load --h1 --rate (Debian's nghttp2-client): its rate mode opens one new TCP
 * connection per request, created in bursts once per rate period from one thread. On the
 * 2-core machine the benchmark runs on, setting up those connections through nginx cost more
 * CPU than the 200 µs handler under test: even at 0.8x the handler's capacity every request
 * took over 1 s (connect alone 0.5-1.1 s), so it measured the generator and nginx, not the
 * application pool. Here a request goes out on an idle kept connection to nginx (a new one is
 * opened only when all are busy), arrivals are spread evenly (checked every millisecond), and a
 * request that times out closes its connection, as a client that gives up does (nginx then
 * aborts the upstream request).
 *
 * Usage: open-loop PORT PATH RATE SECONDS TIMEOUT_MS MAX_CONNS
 * Target: 127.0.0.1 only. Prints one CSV line:
 *   sent,ok_in_time,p50_ms,p99_ms,status_503,other_5xx,other_status,timeouts,conn_errors,no_conn
 * ok_in_time = 2xx answers within the timeout; p50/p99 are of those; no_conn = arrivals dropped
 * because MAX_CONNS connections were all busy (the generator's own limit).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { BUF = 8192, MAX_FD = 65536 };

struct conn {
  int busy;          /* a request is in flight */
  uint64_t start_ns; /* when it was sent (its arrival time) */
  size_t len;        /* bytes of the response read so far */
  char buf[BUF];
};

static struct conn* conns[MAX_FD];
static int idle[MAX_FD], n_idle, n_open, max_fd, max_conns, ep;
static struct sockaddr_in addr;
static char request[512];
static size_t request_len;
static uint32_t* lat_us; /* latencies of the 2xx answered in time */
static long n_lat, sent, s503, s5xx, sother, timeouts, conn_errors, no_conn;
static uint64_t timeout_ns;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void drop(int fd) {
  epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
  free(conns[fd]);
  conns[fd] = NULL;
  n_open--;
}

static int open_conn(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (fd >= MAX_FD) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr*)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  conns[fd] = calloc(1, sizeof(struct conn));
  if (fd > max_fd) max_fd = fd;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  n_open++;
  return fd;
}

static void send_one(uint64_t at) {
  int fd = n_idle ? idle[--n_idle] : -1;
  if (fd < 0) {
    if (n_open >= max_conns) {
      no_conn++;
      return;
    }
    fd = open_conn();
    if (fd < 0) {
      conn_errors++;
      return;
    }
  }
  struct conn* c = conns[fd];
  c->busy = 1, c->start_ns = at, c->len = 0;
  sent++;
  /* A fresh connection may not be connected yet: the kernel queues the bytes once it is (on
   * loopback the connect completes at once; EAGAIN here means a full socket: an error). */
  ssize_t w = send(fd, request, request_len, MSG_NOSIGNAL);
  if (w != (ssize_t)request_len) {
    conn_errors++;
    drop(fd);
  }
}

/* 1: a whole response is in c->buf; sets *status. 0: not yet. -1: unparsable. */
static int complete(struct conn* c, int* status) {
  c->buf[c->len < BUF ? c->len : BUF - 1] = 0;
  char* end = strstr(c->buf, "\r\n\r\n");
  if (!end) return c->len >= BUF - 1 ? -1 : 0;
  if (sscanf(c->buf, "HTTP/1.%*d %d", status) != 1) return -1;
  char* body = end + 4;
  size_t have = c->len - (size_t)(body - c->buf);
  char* cl = strcasestr(c->buf, "\r\nContent-Length:");
  if (cl && cl < end) return have >= (size_t)strtoul(cl + 17, NULL, 10) ? 1 : 0;
  char* te = strcasestr(c->buf, "\r\nTransfer-Encoding: chunked");
  if (te && te < end)
    return strstr(body, "0\r\n\r\n") == body || strstr(body, "\r\n0\r\n\r\n") ? 1 : 0;
  return -1; /* close-delimited: not used by nginx here */
}

static void on_readable(int fd, uint64_t now) {
  struct conn* c = conns[fd];
  if (!c) return;
  ssize_t n = read(fd, c->buf + c->len, BUF - 1 - c->len);
  if (n < 0 && errno == EAGAIN) return;
  if (n <= 0) {
    if (c->busy) conn_errors++;
    drop(fd);
    return;
  }
  c->len += (size_t)n;
  if (!c->busy) return;
  int status = 0, done = complete(c, &status);
  if (done == 0) return;
  if (done < 0) {
    conn_errors++;
    drop(fd);
    return;
  }
  uint64_t took = now - c->start_ns;
  if (took > timeout_ns) {
    timeouts++; /* answered, but after the client would have given up */
  } else if (status >= 200 && status < 300) {
    lat_us[n_lat++] = (uint32_t)(took / 1000);
  } else if (status == 503) {
    s503++;
  } else if (status >= 500) {
    s5xx++;
  } else {
    sother++;
  }
  c->busy = 0;
  c->len = 0;
  idle[n_idle++] = fd;
}

static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: open-loop PORT PATH RATE SECONDS TIMEOUT_MS MAX_CONNS\n");
    return 2;
  }
  int port = atoi(argv[1]);
  double rate = atof(argv[3]), seconds = atof(argv[4]);
  timeout_ns = (uint64_t)atol(argv[5]) * 1000000u;
  max_conns = atoi(argv[6]);
  if (max_conns <= 0 || max_conns > MAX_FD - 64 || port <= 0 || rate <= 0 || seconds <= 0 ||
      seconds > 600 || rate * seconds > 5e6) {
    fprintf(stderr, "open-loop: bad arguments (at most 600 s and 5 million requests)\n");
    return 2;
  }
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* 127.0.0.1 only */
  request_len = (size_t)snprintf(request, sizeof request,
                                 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", argv[2]);
  lat_us = malloc(sizeof(uint32_t) * (size_t)(rate * seconds + 16));
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (!lat_us || ep < 0) return 1;

  uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9);
  uint64_t total = (uint64_t)(rate * seconds);
  uint64_t issued = 0;
  struct epoll_event evs[256];
  for (;;) {
    uint64_t now = now_ns();
    /* Arrivals due by now, each stamped with its own due time (a late tick does not shorten
     * their wait). */
    while (issued < total) {
      uint64_t due = t0 + (uint64_t)((double)issued * 1e9 / rate);
      if (due > now) break;
      send_one(due);
      issued++;
    }
    /* Give up on requests past the timeout: close, as the client would. */
    int in_flight = 0;
    for (int fd = 0; fd <= max_fd; fd++) {
      struct conn* c = conns[fd];
      if (!c || !c->busy) continue;
      if (now - c->start_ns > timeout_ns) {
        timeouts++;
        drop(fd);
      } else {
        in_flight++;
      }
    }
    if (now >= end && issued >= total && in_flight == 0) break;
    if (now >= end + timeout_ns + 2000000000u) break; /* bounded whatever happens */
    int n = epoll_wait(ep, evs, 256, 1);
    now = now_ns();
    for (int i = 0; i < n; i++)
      on_readable(evs[i].data.fd, now);
  }
  qsort(lat_us, (size_t)n_lat, sizeof lat_us[0], cmp_u32);
  double p50 = n_lat ? lat_us[(size_t)(n_lat * 0.50)] / 1000.0 : 0;
  double p99 = n_lat ? lat_us[(size_t)(n_lat * 0.99)] / 1000.0 : 0;
  printf("%ld,%ld,%.2f,%.2f,%ld,%ld,%ld,%ld,%ld,%ld\n", sent, n_lat, p50, p99, s503, s5xx, sother,
         timeouts, conn_errors, no_conn);
  return 0;
}
