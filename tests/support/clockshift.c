// clockshift: an LD_PRELOAD library that adds an offset to the wall clock.
// CLOCK_REALTIME(_COARSE) reads through clock_gettime, gettimeofday and time
// get the offset (signed ms, decimal) written in the file named by
// $CLOCKSHIFT_FILE; CLOCK_MONOTONIC and the rest are left alone, so timers
// keep working. The file is looked at (stat) at most every 2 ms by the
// monotonic clock and re-read only when its inode, size or mtime changed;
// absent or unreadable, the offset is 0. Write it by rename for atomicity.
// Build: cc -shared -fPIC -O2 -o libclockshift.so clockshift.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*gettime_fn)(clockid_t, struct timespec *);
static gettime_fn real_gettime;
static int64_t offset_ns, checked_ns, seen_key = -1;

static int64_t offset(void) {
  struct timespec m;
  real_gettime(CLOCK_MONOTONIC, &m);
  int64_t now = m.tv_sec * 1000000000LL + m.tv_nsec;
  if (now - __atomic_load_n(&checked_ns, __ATOMIC_RELAXED) >= 2000000) {
    __atomic_store_n(&checked_ns, now, __ATOMIC_RELAXED);
    const char *path = getenv("CLOCKSHIFT_FILE");
    struct stat st;
    int64_t key = 0, ms = 0;
    if (path && stat(path, &st) == 0)
      key = (int64_t)st.st_ino * 1000003 ^ st.st_size * 7919 ^ (st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
    if (key != __atomic_load_n(&seen_key, __ATOMIC_RELAXED)) {
      char buf[32] = {0};
      int fd = key ? open(path, O_RDONLY | O_CLOEXEC) : -1;
      if (fd >= 0) { if (read(fd, buf, sizeof buf - 1) > 0) ms = strtoll(buf, NULL, 10); close(fd); }
      __atomic_store_n(&offset_ns, ms * 1000000, __ATOMIC_RELAXED);
      __atomic_store_n(&seen_key, key, __ATOMIC_RELAXED);
    }
  }
  return __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  if (!real_gettime) real_gettime = (gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  int r = real_gettime(clk, ts);
  if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
    int64_t ns = ts->tv_sec * 1000000000LL + ts->tv_nsec + offset();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  struct timespec ts;
  // glibc declares tv nonnull, so a plain NULL check could be optimized out.
  struct timeval *volatile out = tv;
  (void)tz;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  if (r == 0 && out) { out->tv_sec = ts.tv_sec; out->tv_usec = ts.tv_nsec / 1000; }
  return r;
}

time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
