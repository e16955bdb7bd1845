/*
 * The load generator of scripts/bench-direct.sh: a FastCGI client that stands where nginx would,
 * so that a benchmark sees the FastCGI server's own cost and not the web server's.
 *
 *   fcgi-direct-load ADDR [-c CONNS] [-d SECONDS] [-n REQUESTS] [-k] [-p PATH] [-f FILE]
 *     ADDR   unix:/path/to.sock or 127.0.0.1:PORT
 *     -c     connections, each with one request in flight (closed loop; default 1)
 *     -d     seconds to run (default 2)
 *     -n     stop after this many requests instead (at most -d seconds all the same)
 *     -k     FCGI_KEEP_CONN: every connection serves request after request (nginx
 *            `fastcgi_keep_conn on`); without it each request has a connection of its own,
 *            closed by the server after its response (nginx's default)
 *     -p     the request's path (default /)
 *     -f     SCRIPT_FILENAME (php-fpm needs one)
 *
 * Every request carries what nginx's stock fastcgi_params sends for `GET PATH` plus three
 * request headers (about 600 bytes of params), an empty body, and is done at FCGI_END_REQUEST.
 * One line on stdout:
 *   requests=N seconds=S rps=R p50_us=A p99_us=B max_us=M errors=E
 * An error is a response without END_REQUEST (the connection closed, or nothing within 5 s), a
 * protocol status other than "complete", or a Status line that is not 2xx.
 *
 * One thread, one epoll set, non-blocking sockets; nothing is allocated once running.
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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CONNS = 512, HIST_US = 100000, RESPONSE_MAX = 1 << 16 };
enum { BEGIN_REQUEST = 1, END_REQUEST = 3, PARAMS = 4, STDIN = 5, STDOUT = 6 };
static const uint64_t kStuckNs = 5000000000ull;

struct client {
  int fd;
  int in_epoll;
  size_t sent;    /* request bytes written */
  size_t got;     /* response bytes buffered */
  size_t scanned; /* response bytes already framed into records */
  int saw_status; /* the first STDOUT bytes were looked at */
  int bad_status; /* ... and held a non-2xx Status line */
  uint64_t start_ns;
  unsigned char response[RESPONSE_MAX];
};

static struct client clients[MAX_CONNS];
static unsigned char request[4096];
static size_t request_len;
static struct sockaddr_storage address;
static socklen_t address_len;
static int keep_conn, epoll_fd;
static uint64_t latency_hist[HIST_US + 1]; /* 1 µs buckets; the last one holds the rest */
static uint64_t done, errors, max_ns, limit;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static unsigned char* put_length(unsigned char* p, size_t n) {
  if (n < 128) {
    *p++ = (unsigned char)n;
    return p;
  }
  *p++ = (unsigned char)(0x80 | (n >> 24));
  *p++ = (unsigned char)(n >> 16);
  *p++ = (unsigned char)(n >> 8);
  *p++ = (unsigned char)n;
  return p;
}

static unsigned char* put_header(unsigned char* p, int type, size_t length) {
  unsigned char h[8] = {
      1, (unsigned char)type, 0, 1, (unsigned char)(length >> 8), (unsigned char)length, 0, 0};
  memcpy(p, h, 8);
  return p + 8;
}

/* BEGIN_REQUEST, one PARAMS record and its empty end, the empty STDIN: what nginx sends. */
static void build_request(const char* path, const char* script) {
  const char* params[][2] = {
      {"QUERY_STRING", ""},
      {"REQUEST_METHOD", "GET"},
      {"CONTENT_TYPE", ""},
      {"CONTENT_LENGTH", ""},
      {"SCRIPT_NAME", path},
      {"REQUEST_URI", path},
      {"DOCUMENT_URI", path},
      {"DOCUMENT_ROOT", "/usr/share/nginx/html"},
      {"SERVER_PROTOCOL", "HTTP/1.1"},
      {"REQUEST_SCHEME", "http"},
      {"GATEWAY_INTERFACE", "CGI/1.1"},
      {"SERVER_SOFTWARE", "nginx/1.22.1"},
      {"REMOTE_ADDR", "127.0.0.1"},
      {"REMOTE_PORT", "43210"},
      {"REMOTE_USER", ""},
      {"SERVER_ADDR", "127.0.0.1"},
      {"SERVER_PORT", "8080"},
      {"SERVER_NAME", "localhost"},
      {"REDIRECT_STATUS", "200"},
      {"HTTP_HOST", "localhost"},
      {"HTTP_USER_AGENT", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"},
      {"HTTP_ACCEPT", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
      {"HTTP_ACCEPT_LANGUAGE", "en-US,en;q=0.5"},
      {"SCRIPT_FILENAME", script},
  };
  size_t count = sizeof params / sizeof params[0];
  if (!*script) --count; /* SCRIPT_FILENAME is last: only for -f */
  unsigned char body[2048], *b = body;
  for (size_t i = 0; i < count; ++i) {
    size_t n = strlen(params[i][0]), v = strlen(params[i][1]);
    b = put_length(b, n);
    b = put_length(b, v);
    memcpy(b, params[i][0], n);
    memcpy(b + n, params[i][1], v);
    b += n + v;
  }
  unsigned char* p = put_header(request, BEGIN_REQUEST, 8);
  unsigned char begin[8] = {0, 1, (unsigned char)(keep_conn ? 1 : 0), 0, 0, 0, 0, 0};
  memcpy(p, begin, 8);
  p = put_header(p + 8, PARAMS, (size_t)(b - body));
  memcpy(p, body, (size_t)(b - body));
  p = put_header(p + (b - body), PARAMS, 0);
  p = put_header(p, STDIN, 0);
  request_len = (size_t)(p - request);
}

static int parse_address(const char* text) {
  memset(&address, 0, sizeof address);
  if (strncmp(text, "unix:", 5) == 0) {
    struct sockaddr_un* un = (struct sockaddr_un*)&address;
    un->sun_family = AF_UNIX;
    if (strlen(text + 5) >= sizeof un->sun_path) return -1;
    strcpy(un->sun_path, text + 5);
    address_len = sizeof *un;
    return 0;
  }
  const char* colon = strrchr(text, ':');
  if (!colon) return -1;
  char host[64];
  snprintf(host, sizeof host, "%.*s", (int)(colon - text), text);
  struct sockaddr_in* in = (struct sockaddr_in*)&address;
  in->sin_family = AF_INET;
  in->sin_port = htons((uint16_t)atoi(colon + 1));
  address_len = sizeof *in;
  return inet_pton(AF_INET, host, &in->sin_addr) == 1 ? 0 : -1;
}

static void watch(struct client* c, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.ptr = c};
  epoll_ctl(epoll_fd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev);
  c->in_epoll = 1;
}

static void disconnect(struct client* c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->in_epoll = 0;
}

/* A fresh connection, or the kept one, starts the next request: written at once if it fits. */
static void start_request(struct client* c) {
  c->sent = c->got = c->scanned = 0;
  c->saw_status = c->bad_status = 0;
  c->start_ns = now_ns();
  if (c->fd < 0) {
    c->fd = socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
      perror("socket");
      exit(1);
    }
    if (address.ss_family == AF_INET) {
      int one = 1;
      setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(c->fd, (struct sockaddr*)&address, address_len) != 0 && errno != EINPROGRESS &&
        errno != EAGAIN) {
      perror("connect");
      exit(1);
    }
  }
  ssize_t n = write(c->fd, request, request_len);
  if (n > 0) c->sent = (size_t)n;
  watch(c, c->sent == request_len ? EPOLLIN : EPOLLIN | EPOLLOUT);
}

static void finish_request(struct client* c, int failed) {
  uint64_t took = now_ns() - c->start_ns;
  if (failed) {
    ++errors;
    disconnect(c);
  } else {
    ++done;
    uint64_t us = took / 1000;
    ++latency_hist[us < HIST_US ? us : HIST_US];
    if (took > max_ns) max_ns = took;
    if (!keep_conn) disconnect(c); /* the server closes; so does nginx, at once */
  }
  if (limit && done + errors >= limit) return disconnect(c); /* -n reached: this one rests */
  start_request(c); /* closed loop: the next request at once */
}

/* Frames what arrived; 1 when END_REQUEST completed the response, -1 on a bad one. */
static int scan_response(struct client* c) {
  while (c->got - c->scanned >= 8) {
    const unsigned char* h = c->response + c->scanned;
    size_t length = (size_t)h[4] << 8 | h[5], record = 8 + length + h[6];
    if (h[0] != 1) return -1;
    if (c->got - c->scanned < record) break;
    if (h[1] == STDOUT && length > 0 && !c->saw_status) {
      c->saw_status = 1;
      if (length >= 9 && memcmp(h + 8, "Status: ", 8) == 0 && h[16] != '2') c->bad_status = 1;
    }
    if (h[1] == END_REQUEST) return length >= 8 && h[8 + 4] == 0 && !c->bad_status ? 1 : -1;
    c->scanned += record;
  }
  if (c->scanned == c->got) c->got = c->scanned = 0; /* keep the buffer from filling */
  if (c->got == sizeof c->response) return -1;
  return 0;
}

static void on_event(struct client* c, uint32_t events) {
  if (c->sent < request_len && (events & EPOLLOUT)) {
    ssize_t n = write(c->fd, request + c->sent, request_len - c->sent);
    if (n < 0 && errno != EAGAIN) return finish_request(c, 1);
    if (n > 0) c->sent += (size_t)n;
    if (c->sent == request_len) watch(c, EPOLLIN);
  }
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  ssize_t n = read(c->fd, c->response + c->got, sizeof c->response - c->got);
  if (n < 0 && errno == EAGAIN) return;
  if (n <= 0) return finish_request(c, 1); /* closed before END_REQUEST */
  c->got += (size_t)n;
  int verdict = scan_response(c);
  if (verdict == 0) return;
  finish_request(c, verdict < 0);
}

static uint64_t percentile_us(double p) {
  uint64_t want = (uint64_t)(p * (double)done), seen = 0;
  for (size_t us = 0; us <= HIST_US; ++us) {
    seen += latency_hist[us];
    if (seen > want) return us;
  }
  return HIST_US;
}

int main(int argc, char** argv) {
  int conns = 1;
  double seconds = 2;
  const char *path = "/", *script = "";
  if (argc < 2 || parse_address(argv[1]) != 0) {
    fprintf(stderr,
            "usage: %s unix:/path|127.0.0.1:PORT [-c N] [-d S] [-n N] [-k] [-p PATH] [-f FILE]\n",
            argv[0]);
    return 2;
  }
  for (int opt; (opt = getopt(argc - 1, argv + 1, "c:d:n:kp:f:")) != -1;) {
    switch (opt) {
    case 'c':
      conns = atoi(optarg);
      break;
    case 'd':
      seconds = atof(optarg);
      break;
    case 'n':
      limit = strtoull(optarg, NULL, 10);
      break;
    case 'k':
      keep_conn = 1;
      break;
    case 'p':
      path = optarg;
      break;
    case 'f':
      script = optarg;
      break;
    default:
      return 2;
    }
  }
  if (conns < 1 || conns > MAX_CONNS || seconds <= 0) {
    fprintf(stderr, "-c: 1..%d, -d: > 0\n", MAX_CONNS);
    return 2;
  }
  build_request(path, script);
  epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  for (int i = 0; i < conns; ++i) {
    clients[i].fd = -1;
    start_request(&clients[i]);
  }
  const uint64_t begin = now_ns(), end = begin + (uint64_t)(seconds * 1e9);
  struct epoll_event events[MAX_CONNS];
  for (uint64_t now = begin; now < end && !(limit && done + errors >= limit); now = now_ns()) {
    int n = epoll_wait(epoll_fd, events, MAX_CONNS, 100);
    for (int i = 0; i < n; ++i) {
      on_event(events[i].data.ptr, events[i].events);
    }
    if (n == 0)
      for (int i = 0; i < conns; ++i)
        if (now - clients[i].start_ns > kStuckNs) finish_request(&clients[i], 1);
  }
  const double took = (double)(now_ns() - begin) / 1e9;
  printf("requests=%llu seconds=%.3f rps=%.0f p50_us=%llu p99_us=%llu max_us=%llu errors=%llu\n",
         (unsigned long long)done, took, (double)done / took,
         (unsigned long long)percentile_us(0.50), (unsigned long long)percentile_us(0.99),
         (unsigned long long)(max_ns / 1000), (unsigned long long)errors);
  return 0;
}
