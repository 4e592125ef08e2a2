/*
 * bootstate's one native function: flock(2) on a descriptor, so taking a lock does not fork the whole Node
 * process to run flock(1). N-API only, so one build per architecture serves every Node version.
 *
 * flock(fd, op, timeoutMs) → 0 or an errno. op: 1 shared, 2 exclusive, 8 unlock. A conflicting holder is retried
 * with LOCK_NB and a growing sleep (0.1 → 10 ms) until timeoutMs has passed; then EWOULDBLOCK.
 */
#define NAPI_VERSION 8
#include <errno.h>
#include <node_api.h>
#include <sys/file.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int lock(int fd, int op, double timeout_ms) {
  if (op == LOCK_UN) {
    while (flock(fd, LOCK_UN) != 0) {
      if (errno != EINTR) return errno;
    }
    return 0;
  }
  double deadline = now_ms() + timeout_ms;
  long pause_us = 100;
  for (;;) {
    if (flock(fd, op | LOCK_NB) == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return errno;
    double left_ms = deadline - now_ms();
    if (left_ms <= 0) return EWOULDBLOCK;
    long sleep_us = pause_us < left_ms * 1e3 ? pause_us : (long)(left_ms * 1e3) + 1;
    struct timespec pause = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
    nanosleep(&pause, NULL);
    if (pause_us < 10000) pause_us *= 2;
  }
}

static napi_value js_flock(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  int32_t fd = -1, op = 0;
  double timeout_ms = 0;
  napi_value result;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int32(env, argv[1], &op) != napi_ok ||
      napi_get_value_double(env, argv[2], &timeout_ms) != napi_ok ||
      (op != LOCK_SH && op != LOCK_EX && op != LOCK_UN)) {
    napi_throw_type_error(env, NULL, "flock(fd, op, timeoutMs): op is 1 (shared), 2 (exclusive) or 8 (unlock)");
    return NULL;
  }
  napi_create_int32(env, lock(fd, op, timeout_ms), &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "flock", NAPI_AUTO_LENGTH, js_flock, NULL, &fn);
  napi_set_named_property(env, exports, "flock", fn);
  return exports;
}
