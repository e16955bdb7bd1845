/*
 * The "limit" contender of scripts/bench.sh: a near-free FastCGI responder
 * that stands for the most any FastCGI host could do behind the same nginx.
 * It is not a FastCGI library: it assumes nginx's framing (one request at a
 * time per connection, the request complete once the empty FCGI_STDIN record
 * has arrived), parses only record headers plus the BEGIN_REQUEST flags, and
 * answers every request with one canned write.
 *
 * Started like the baseline by `spawn-fcgi -F W`, which hands each of the W
 * processes the listening socket on fd 0. Each process runs one epoll loop
 * over that socket (non-blocking, EPOLLEXCLUSIVE so one wake-up per incoming
 * connection, not W) and its own connections. A new connection is read
 * at once, before it joins the epoll set: nginx writes the whole request
 * right after connecting, so without keep-alive a request usually costs
 * accept4, read, write and close and never touches epoll_ctl. Nothing is
 * allocated per request or per connection: the connection table is static.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { LISTEN_FD = 0, MAX_FD = 16384, MAX_EVENTS = 256, ACCEPT_BATCH = 64 };
enum { FCGI_BEGIN_REQUEST = 1, FCGI_STDOUT = 6, FCGI_STDIN = 5, FCGI_KEEP_CONN = 1 };

/* The same header set as fcgi-host's hello app: with Content-Length nginx
 * passes the reply on as it is, without it nginx must chunk it to the client,
 * which costs nginx more than the responder saves (measured: the ceiling fell
 * below fcgi-host with keep-alive). */
#define BODY "Status: 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nOK"
#define BODY_LEN (sizeof BODY - 1)

/* STDOUT(body) + empty STDOUT + END_REQUEST(complete), request id 0 for now:
 * only the three id fields change per request. */
static unsigned char reply[8 + BODY_LEN + 8 + 8 + 8];
static const size_t id_at[3] = {2, 8 + BODY_LEN + 2, 8 + BODY_LEN + 8 + 2};

struct conn {
  unsigned char hdr[8]; /* the record header being read */
  unsigned char flags;  /* BEGIN_REQUEST flags byte */
  uint8_t hlen;         /* header bytes seen so far (8 = in the content) */
  uint8_t type;         /* type of the current record */
  uint16_t begin_off;   /* content bytes of a BEGIN record seen so far */
  uint32_t skip;        /* content + padding bytes left of the current record */
  uint16_t id;          /* request id from BEGIN_REQUEST */
  uint8_t watched;      /* 0: not in the epoll set yet, else the events */
  uint8_t out_len;      /* unsent tail of a reply (rare: socket buffer full) */
  unsigned char out[sizeof reply];
};
static struct conn conns[MAX_FD];
static unsigned char inbuf[65536];
static int ep;

static void put16(unsigned char* p, unsigned v) {
  p[0] = (unsigned char)(v >> 8);
  p[1] = (unsigned char)v;
}

static void build_reply(void) {
  unsigned char* p = reply;
  p[0] = 1, p[1] = FCGI_STDOUT, put16(p + 4, BODY_LEN), p[6] = 0, p[7] = 0;
  memcpy(p + 8, BODY, BODY_LEN);
  p += 8 + BODY_LEN;
  p[0] = 1, p[1] = FCGI_STDOUT; /* empty STDOUT: length 0 */
  p += 8;
  p[0] = 1, p[1] = 3 /* FCGI_END_REQUEST */,
  put16(p + 4, 8); /* app status 0, FCGI_REQUEST_COMPLETE */
}

/* Put fd in the epoll set, or change its events: 0 if that failed. */
static int watch(int fd, struct conn* c, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.fd = fd};
  if (c->watched == (uint8_t)events) return 1;
  if (epoll_ctl(ep, c->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0) return 0;
  c->watched = (uint8_t)events;
  return 1;
}

static void drop(int fd) {
  close(fd); /* also removes it from the epoll set */
  memset(&conns[fd], 0, sizeof conns[fd]);
}

/* One canned write; returns 0 if the connection is to be closed. */
static int respond(int fd, struct conn* c) {
  for (int i = 0; i < 3; i++)
    put16(reply + id_at[i], c->id);
  /* send, not write: MSG_NOSIGNAL. nginx closes the upstream connection when
   * its client leaves (wrk stopping mid-request does that at the end of every
   * run), and a write to it would raise SIGPIPE, whose default action killed
   * the responder between two runs: the next nginx then met "connection
   * refused" on a socket nobody served any more. */
  ssize_t n = send(fd, reply, sizeof reply, MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN) return 0;
  if (n < 0) n = 0;
  if ((size_t)n < sizeof reply) { /* keep the tail for EPOLLOUT */
    c->out_len = (uint8_t)(sizeof reply - (size_t)n);
    memcpy(c->out, reply + n, c->out_len);
    return watch(fd, c, EPOLLIN | EPOLLOUT);
  }
  return (c->flags & FCGI_KEEP_CONN) != 0;
}

static int flush_out(int fd, struct conn* c) {
  ssize_t n = send(fd, c->out, c->out_len, MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN;
  memmove(c->out, c->out + n, c->out_len - (size_t)n);
  c->out_len = (uint8_t)(c->out_len - (size_t)n);
  if (c->out_len) return 1;
  return watch(fd, c, EPOLLIN) && (c->flags & FCGI_KEEP_CONN) != 0;
}

/* Walk the record headers in the bytes read; returns 0 to close. */
static int consume(int fd, struct conn* c, const unsigned char* p, size_t n) {
  while (n > 0) {
    if (c->hlen < 8) {
      size_t want = 8u - c->hlen, k = want < n ? want : n;
      memcpy(c->hdr + c->hlen, p, k);
      c->hlen = (uint8_t)(c->hlen + k), p += k, n -= k;
      if (c->hlen < 8) return 1;
      c->type = c->hdr[1];
      c->skip = ((uint32_t)c->hdr[4] << 8 | c->hdr[5]) + c->hdr[6];
      c->begin_off = 0;
      if (c->type == FCGI_BEGIN_REQUEST) c->id = (uint16_t)(c->hdr[2] << 8 | c->hdr[3]);
    } else {
      size_t k = c->skip < n ? c->skip : n;
      /* BEGIN_REQUEST body: role (2 bytes), flags, reserved. */
      if (c->type == FCGI_BEGIN_REQUEST && c->begin_off <= 2 && c->begin_off + k > 2)
        c->flags = p[2 - c->begin_off];
      c->begin_off = (uint16_t)(c->begin_off + k);
      c->skip -= (uint32_t)k, p += k, n -= k;
    }
    if (c->hlen == 8 && c->skip == 0) { /* record complete */
      int end_of_stdin = c->type == FCGI_STDIN && c->hdr[4] == 0 && c->hdr[5] == 0;
      c->hlen = 0;
      if (end_of_stdin && (c->out_len || !respond(fd, c))) return 0;
      /* nginx sends nothing more until the reply, so no data follows here
       * unless the connection is kept; leftover bytes start the next request. */
    }
  }
  return 1;
}

/* Read what has arrived and answer it; closes the connection when done with
 * it, else makes sure epoll will report its next bytes. */
static void on_readable(int fd) {
  struct conn* c = &conns[fd];
  ssize_t n = read(fd, inbuf, sizeof inbuf);
  if (n < 0 && errno == EAGAIN) {
    if (!watch(fd, c, EPOLLIN)) drop(fd);
    return;
  }
  if (n <= 0 || !consume(fd, c, inbuf, (size_t)n) || (!c->out_len && !watch(fd, c, EPOLLIN)))
    drop(fd);
}

int main(void) {
  build_reply();
  int fl = fcntl(LISTEN_FD, F_GETFL);
  if (fl < 0 || fcntl(LISTEN_FD, F_SETFL, fl | O_NONBLOCK) < 0) {
    perror("limit-responder: fd 0 is not the listening socket (start it under spawn-fcgi)");
    return 1;
  }
  /* On TCP, what fcgi-host does to its listen socket, so the ceiling is not
   * lower for want of it (both fail harmlessly on a Unix socket): accepted
   * sockets inherit TCP_NODELAY, and TCP_DEFER_ACCEPT holds a connection
   * back until its request bytes are there, so the first read finds them. */
  int on = 1;
  setsockopt(LISTEN_FD, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  setsockopt(LISTEN_FD, IPPROTO_TCP, TCP_DEFER_ACCEPT, &on, sizeof on);
  ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event lev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = LISTEN_FD};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, LISTEN_FD, &lev) < 0) {
    perror("limit-responder: epoll");
    return 1;
  }
  struct epoll_event evs[MAX_EVENTS];
  for (;;) {
    int ne = epoll_wait(ep, evs, MAX_EVENTS, -1);
    if (ne < 0) {
      if (errno == EINTR) continue;
      perror("limit-responder: epoll_wait");
      return 1;
    }
    for (int i = 0; i < ne; i++) {
      int fd = evs[i].data.fd;
      if (fd == LISTEN_FD) {
        /* Bounded batch: with W processes sharing the socket, one greedy
         * acceptor must not take every pending connection. */
        for (int a = 0; a < ACCEPT_BATCH; a++) {
          int cfd = accept4(LISTEN_FD, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (cfd < 0) break; /* EAGAIN: another process took it, or none left */
          if (cfd >= MAX_FD) {
            close(cfd);
            continue;
          }
          on_readable(cfd);
        }
        continue;
      }
      struct conn* c = &conns[fd];
      if ((evs[i].events & EPOLLOUT) && c->out_len && !flush_out(fd, c)) {
        drop(fd);
        continue;
      }
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(fd);
    }
  }
}
