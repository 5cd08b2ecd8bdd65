/* The C API's asynchronous paths against a real gateway (run by client_examples_test in the rxe guest):
 * callbacks that submit the next request, a GET callback told TOO_SMALL with the size needed, the stats of
 * an older caller's smaller struct, and destroy with requests in flight (each callback runs exactly once).
 * Strict C99. Usage: c_api_guest_check GATEWAY_ADDR PORT */
#include <poll.h>
#include <rdmagate/client.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define EXPECT(cond)                                                                              \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                           \
      failures++;                                                                                 \
    }                                                                                             \
  } while (0)

static rdmagate_client* client;

/* A chain of PUTs, each submitted by the previous one's callback. */
enum { kChain = 100 };
static int chain_done, chain_failed;
static char chain_value[64];
static void chain_next(void* arg, int status, uint64_t size) {
  char key[32];
  int i = (int)(size_t)arg;
  if (status != RDMAGATE_OK || size != sizeof chain_value) chain_failed++;
  if (i + 1 == kChain) {
    chain_done = 1;
    return;
  }
  snprintf(key, sizeof key, "capi-chain-%d", i + 1);
  if (rdmagate_put_async(client, key, strlen(key), chain_value, sizeof chain_value, chain_next,
                         (void*)(size_t)(i + 1)) != RDMAGATE_OK) {
    chain_failed++;
    chain_done = 1;
  }
}

struct result { int runs, status; uint64_t size; };
static void record(void* arg, int status, uint64_t size) {
  struct result* r = arg;
  r->runs++, r->status = status, r->size = size;
}

static void wait_until(volatile int* flag) {
  while (!*flag)
    if (rdmagate_progress(client) == 0 && rdmagate_arm(client) == RDMAGATE_OK) {
      struct pollfd p;
      p.fd = rdmagate_event_fd(client), p.events = POLLIN, p.revents = 0;
      poll(&p, 1, 100);
    }
}

int main(int argc, char** argv) {
  enum { kInFlight = 64 };
  static char small[8], big[kInFlight][4096];
  static struct result in_flight[kInFlight];
  struct result too_small = {0, 0, 0};
  rdmagate_stats stats;
  char err[256], key[32];
  int i, settled = 0;
  rdmagate_config* cfg = rdmagate_config_new();
  if (argc != 3) return fprintf(stderr, "usage: %s GATEWAY_ADDR PORT\n", argv[0]), 2;
  EXPECT(rdmagate_config_add_gateway(cfg, argv[1], (uint16_t)atoi(argv[2])) == RDMAGATE_OK);
  if (rdmagate_client_create(cfg, &client, err, sizeof err) != RDMAGATE_OK) return fprintf(stderr, "%s\n", err), 1;
  rdmagate_config_free(cfg);
  EXPECT(rdmagate_client_wait_connected(client, 30000) == RDMAGATE_OK);
  EXPECT(rdmagate_event_fd(client) >= 0);

  memset(chain_value, 'c', sizeof chain_value);
  EXPECT(rdmagate_put_async(client, "capi-chain-0", 12, chain_value, sizeof chain_value, chain_next, NULL) ==
         RDMAGATE_OK);
  wait_until(&chain_done);
  EXPECT(chain_failed == 0);
  EXPECT(rdmagate_get(client, "capi-chain-99", 13, big[0], sizeof big[0], NULL) == RDMAGATE_OK);
  EXPECT(memcmp(big[0], chain_value, sizeof chain_value) == 0);
  printf("c_api_guest_check: %d chained PUTs from callbacks, %d failed\n", kChain, chain_failed);

  EXPECT(rdmagate_get_async(client, "capi-chain-5", 12, small, sizeof small, record, &too_small) == RDMAGATE_OK);
  while (too_small.runs == 0) rdmagate_progress(client);
  EXPECT(too_small.runs == 1 && too_small.status == RDMAGATE_TOO_SMALL && too_small.size == sizeof chain_value);
  EXPECT(rdmagate_get_async(client, "", 0, small, sizeof small, record, &too_small) == RDMAGATE_BAD_REQUEST);
  EXPECT(rdmagate_put_async(client, "k", 1, "v", 1, NULL, NULL) == RDMAGATE_INVALID_ARGUMENT);

  /* An older caller's struct ends before `busy`: the library writes no byte past it. */
  memset(&stats, 0xAB, sizeof stats);
  stats.struct_size = offsetof(rdmagate_stats, busy);
  EXPECT(rdmagate_client_stats(client, &stats) == RDMAGATE_OK);
  EXPECT(stats.struct_size == offsetof(rdmagate_stats, busy));
  EXPECT(stats.submitted >= kChain + 2 && stats.completed >= kChain + 2);
  EXPECT(stats.busy == 0xABABABABABABABABull && stats.connections_up == 0xABABABABu);
  stats.struct_size = sizeof stats;
  EXPECT(rdmagate_client_stats(client, &stats) == RDMAGATE_OK && stats.connections_up >= 1);
  /* The GET of 4096 bytes above went by chunk, through a memory window of its own (rxe has them). */
  EXPECT(stats.window_requests >= 1 && stats.unscoped_requests == 0);
  printf("c_api_guest_check: stats submitted %llu completed %llu connections_up %u\n",
         (unsigned long long)stats.submitted, (unsigned long long)stats.completed, stats.connections_up);

  /* In flight at destroy: every callback runs once, inside destroy at the latest. */
  for (i = 0; i < kInFlight; i++) {
    snprintf(key, sizeof key, "capi-chain-%d", i);
    EXPECT(rdmagate_get_async(client, key, strlen(key), big[i], sizeof big[i], record, &in_flight[i]) ==
           RDMAGATE_OK);
  }
  rdmagate_client_destroy(client);
  for (i = 0; i < kInFlight; i++) {
    EXPECT(in_flight[i].runs == 1);
    EXPECT(in_flight[i].status == RDMAGATE_OK || in_flight[i].status == RDMAGATE_SHUTDOWN);
    settled += in_flight[i].status == RDMAGATE_SHUTDOWN;
  }
  printf("c_api_guest_check: destroy with %d GETs in flight: %d completed OK, %d SHUTDOWN\n", kInFlight,
         kInFlight - settled, settled);

  /* memory_windows "false": the chunked GET goes out under the registration's key, and the stats say so. */
  cfg = rdmagate_config_new();
  EXPECT(rdmagate_config_add_gateway(cfg, argv[1], (uint16_t)atoi(argv[2])) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "memory_windows", "false") == RDMAGATE_OK);
  if (rdmagate_client_create(cfg, &client, err, sizeof err) != RDMAGATE_OK)
    return fprintf(stderr, "%s\n", err), 1;
  rdmagate_config_free(cfg);
  EXPECT(rdmagate_client_wait_connected(client, 30000) == RDMAGATE_OK);
  EXPECT(rdmagate_get(client, "capi-chain-99", 13, big[0], sizeof big[0], NULL) == RDMAGATE_OK);
  EXPECT(memcmp(big[0], chain_value, sizeof chain_value) == 0);
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  EXPECT(rdmagate_client_stats(client, &stats) == RDMAGATE_OK);
  EXPECT(stats.window_requests == 0 && stats.unscoped_requests >= 1);
  printf("c_api_guest_check: memory_windows false: window_requests %llu unscoped_requests %llu\n",
         (unsigned long long)stats.window_requests, (unsigned long long)stats.unscoped_requests);
  rdmagate_client_destroy(client);
  if (failures != 0) return fprintf(stderr, "c_api_guest_check: %d check(s) failed\n", failures), 1;
  printf("c_api_guest_check: all checks passed\n");
  return 0;
}
