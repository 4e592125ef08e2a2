/*
 * bootstate's native functions, so that neither taking a lock nor telling systemd something forks the whole Node
 * process to run flock(1) or systemd-notify(1). N-API only, so one build per architecture serves every Node version.
 *
 * flock(fd, op, timeoutMs) → 0 or an errno. op: 1 shared, 2 exclusive, 8 unlock. A conflicting holder is retried
 * with LOCK_NB and a growing sleep (0.1 → 10 ms) until timeoutMs has passed; then EWOULDBLOCK.
 *
 * notify(socketPath, message) → 0 or an errno. One AF_UNIX datagram holding `message` to `socketPath`, the value of
 * $NOTIFY_SOCKET: a path, or with a leading '@' a name in the abstract namespace (the '@' stands for the leading NUL
 * and the address ends with the name, no trailing NUL). Any other form is EAFNOSUPPORT.
 */
#define NAPI_VERSION 8
#include <errno.h>
#include <node_api.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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

static int send_datagram(const char *path, size_t path_len, const char *message, size_t message_len) {
  struct sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  socklen_t address_len;
  if (path_len >= 2 && path[0] == '@') {
    // Abstract: sun_path[0] stays NUL; the name is the rest, and the address is exactly as long as it.
    if (path_len > sizeof address.sun_path) return ENAMETOOLONG;
    memcpy(address.sun_path + 1, path + 1, path_len - 1);
    address_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len);
  } else if (path_len >= 1 && path[0] == '/') {
    if (path_len >= sizeof address.sun_path) return ENAMETOOLONG;
    memcpy(address.sun_path, path, path_len);
    address_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len + 1);
  } else {
    return EAFNOSUPPORT;
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int result = 0;
  for (;;) {
    ssize_t sent = sendto(fd, message, message_len, MSG_NOSIGNAL, (struct sockaddr *)&address, address_len);
    if (sent >= 0) break;
    if (errno == EINTR) continue;
    result = errno;
    break;
  }
  close(fd);
  return result;
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

/* A JS string as UTF-8 in a fresh buffer (free it); NULL when it is not a string or memory is short. */
static char *utf8_of(napi_env env, napi_value value, size_t *len) {
  if (napi_get_value_string_utf8(env, value, NULL, 0, len) != napi_ok) return NULL;
  char *text = malloc(*len + 1);
  if (!text) return NULL;
  if (napi_get_value_string_utf8(env, value, text, *len + 1, len) != napi_ok) {
    free(text);
    return NULL;
  }
  return text;
}

static napi_value js_notify(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_value result;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) {
    napi_throw_type_error(env, NULL, "notify(socketPath, message): two strings");
    return NULL;
  }
  size_t path_len = 0, message_len = 0;
  char *path = utf8_of(env, argv[0], &path_len);
  char *message = path ? utf8_of(env, argv[1], &message_len) : NULL;
  if (!path || !message) {
    free(path);
    napi_throw_type_error(env, NULL, "notify(socketPath, message): two strings");
    return NULL;
  }
  int errno_value = send_datagram(path, path_len, message, message_len);
  free(path);
  free(message);
  napi_create_int32(env, errno_value, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "flock", NAPI_AUTO_LENGTH, js_flock, NULL, &fn);
  napi_set_named_property(env, exports, "flock", fn);
  napi_create_function(env, "notify", NAPI_AUTO_LENGTH, js_notify, NULL, &fn);
  napi_set_named_property(env, exports, "notify", fn);
  return exports;
}
