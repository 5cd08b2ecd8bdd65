/* PUT, GET (verified) and DELETE of 10 B .. 2 MiB values, sleeping on the client's event fd while each
 * request is in flight. Usage: put_get_delete_c GATEWAY_ADDR [PORT]
 * A gateway that requires authentication (the shipped config does): set RDMAGATE_PRINCIPAL and
 * RDMAGATE_SECRETS_FILE (the gateway's secrets file format, mode 0600). */
#include <poll.h>
#include <rdmagate/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct op { volatile int done, status; uint64_t size; };
static void on_done(void* arg, int status, uint64_t size) {
  struct op* op = arg;
  op->status = status, op->size = size, op->done = 1;
}
/* The event-loop pattern: progress; when nothing was done, arm and sleep until the fd is readable. */
static int wait_op(rdmagate_client* c, struct op* op) {
  while (!op->done)
    if (rdmagate_progress(c) == 0 && rdmagate_arm(c) == RDMAGATE_OK) {
      struct pollfd p = {rdmagate_event_fd(c), POLLIN, 0};
      poll(&p, 1, 100); /* the timeout only matters in modes without an event fd (fd -1) */
    }
  return op->status;
}
#define CHECK(call) do { int rc_ = (call); if (rc_ != RDMAGATE_OK) { \
  fprintf(stderr, "%s: %s\n", #call, rdmagate_strerror(rc_)); return 1; } } while (0)

int main(int argc, char** argv) {
  static const size_t sizes[] = {10, 4096, 65537, 1 << 20, 2 << 20};
  char err[256], key[32];
  rdmagate_client* c;
  rdmagate_config* cfg = rdmagate_config_new();
  if (argc < 2) return fprintf(stderr, "usage: %s GATEWAY_ADDR [PORT]\n", argv[0]), 2;
  CHECK(rdmagate_config_add_gateway(cfg, argv[1], argc > 2 ? (uint16_t)atoi(argv[2]) : 0));
  const char* principal = getenv("RDMAGATE_PRINCIPAL");
  const char* secrets = getenv("RDMAGATE_SECRETS_FILE");
  if (principal) CHECK(rdmagate_config_set(cfg, "principal", principal));
  if (secrets) CHECK(rdmagate_config_set(cfg, "secrets_file", secrets));
  if (rdmagate_client_create(cfg, &c, err, sizeof err) != RDMAGATE_OK) return fprintf(stderr, "%s\n", err), 1;
  rdmagate_config_free(cfg);
  unsigned char* val = rdmagate_buffer_alloc(c, 2 << 20), *got = rdmagate_buffer_alloc(c, 2 << 20);
  if (!val || !got) return fprintf(stderr, "rdmagate_buffer_alloc failed\n"), 1;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    struct op put = {0, 0, 0}, get = {0, 0, 0}, del = {0, 0, 0};
    size_t n = sizes[i], j;
    snprintf(key, sizeof key, "example-c-%zu", n);
    for (j = 0; j < n; j++) val[j] = (unsigned char)(j * 31 + n);
    CHECK(rdmagate_put_async(c, key, strlen(key), val, n, on_done, &put));
    CHECK(wait_op(c, &put));
    CHECK(rdmagate_get_async(c, key, strlen(key), got, 2 << 20, on_done, &get));
    CHECK(wait_op(c, &get));
    if (get.size != n || memcmp(val, got, n) != 0) return fprintf(stderr, "%s: GET differs\n", key), 1;
    CHECK(rdmagate_delete_async(c, key, strlen(key), on_done, &del));
    CHECK(wait_op(c, &del));
    if (rdmagate_get(c, key, strlen(key), got, 2 << 20, NULL) != RDMAGATE_NOT_FOUND)
      return fprintf(stderr, "%s: still there after DELETE\n", key), 1;
    printf("%s: %zu bytes put, read back equal, deleted\n", key, n);
  }
  rdmagate_buffer_free(c, val, 2 << 20), rdmagate_buffer_free(c, got, 2 << 20);
  rdmagate_client_destroy(c);
  return 0;
}
