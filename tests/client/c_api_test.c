/* The C API's host checks (no RDMA needed): compiled as strict C99 (-std=c99 -pedantic -Werror, so the
 * public header is checked as C), then run: strerror and the names for every code, the configuration's
 * refusals with their messages, NULL handles, and client creation failing with a status and a message that
 * names the problem (no gateway; no RDMA device or an unknown one). */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen, chmod, unlink under -std=c99 */
#include <rdmagate/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                        \
    }                                                                    \
  } while (0)

static const int codes[] = {RDMAGATE_OK,           RDMAGATE_NOT_FOUND,        RDMAGATE_TOO_LARGE,
                            RDMAGATE_NO_SPACE,     RDMAGATE_BAD_REQUEST,      RDMAGATE_TOO_SMALL,
                            RDMAGATE_NO_RESOURCES, RDMAGATE_BULK_FAILED,      RDMAGATE_CONNECTION_LOST,
                            RDMAGATE_UNAVAILABLE,  RDMAGATE_TIMEOUT,          RDMAGATE_BUSY,
                            RDMAGATE_REGISTRATION, RDMAGATE_SHUTDOWN,         RDMAGATE_PROTOCOL,
                            RDMAGATE_STORE_UNAVAILABLE, RDMAGATE_CORRUPT,     RDMAGATE_AUTH_REQUIRED,
                            RDMAGATE_AUTH_DENIED,  RDMAGATE_AUTH_CONNECTION_LIMIT, RDMAGATE_AUTH_GATEWAY_UNPROVEN,
                            RDMAGATE_FORBIDDEN,    RDMAGATE_QUOTA_EXCEEDED,   RDMAGATE_INVALID_ARGUMENT,
                            RDMAGATE_SETUP_FAILED, RDMAGATE_NO_MEMORY,        RDMAGATE_INTERNAL};
#define NCODES (sizeof codes / sizeof codes[0])

static void test_strerror(void) {
  size_t i, j;
  for (i = 0; i < NCODES; i++) {
    const char* text = rdmagate_strerror(codes[i]);
    EXPECT(text != NULL && text[0] != '\0' && strcmp(text, rdmagate_strerror(-1)) != 0);
    EXPECT(strcmp(rdmagate_status_name(codes[i]), "UNKNOWN") != 0);
    for (j = 0; j < i; j++) { /* every code has its own text and name */
      EXPECT(strcmp(text, rdmagate_strerror(codes[j])) != 0);
      EXPECT(strcmp(rdmagate_status_name(codes[i]), rdmagate_status_name(codes[j])) != 0);
    }
  }
  EXPECT(strcmp(rdmagate_strerror(23), "unknown rdmagate status") == 0);
  EXPECT(RDMAGATE_C_API_VERSION >= 2);
  EXPECT(strcmp(rdmagate_status_name(RDMAGATE_AUTH_DENIED), "AUTH_DENIED") == 0);
  EXPECT(strcmp(rdmagate_status_name(RDMAGATE_QUOTA_EXCEEDED), "QUOTA_EXCEEDED") == 0);
  EXPECT(strcmp(rdmagate_strerror(-1), "unknown rdmagate status") == 0);
  EXPECT(strcmp(rdmagate_status_name(999), "UNKNOWN") == 0);
  EXPECT(strcmp(rdmagate_status_name(RDMAGATE_NOT_FOUND), "NOT_FOUND") == 0);
  EXPECT(strcmp(rdmagate_strerror(RDMAGATE_NOT_FOUND), "no such key") == 0);
}

static void test_config(void) {
  rdmagate_config* cfg = rdmagate_config_new();
  EXPECT(cfg != NULL);
  EXPECT(strcmp(rdmagate_config_error(cfg), "") == 0);
  EXPECT(rdmagate_config_add_gateway(cfg, "not-an-ip", 7471) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(rdmagate_config_error(cfg), "\"not-an-ip\" is not an IPv4 or IPv6 literal") != NULL);
  EXPECT(rdmagate_config_add_gateway(cfg, NULL, 7471) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "no_such_option", "1") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(rdmagate_config_error(cfg), "unknown option \"no_such_option\"") != NULL);
  EXPECT(rdmagate_config_set(cfg, "queue_depth", "70000") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(rdmagate_config_error(cfg), "queue_depth = \"70000\": want an unsigned integer up to 65535") != NULL);
  EXPECT(rdmagate_config_set(cfg, "cores", "-1") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "cores", "2x") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "progress", "fast") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(rdmagate_config_error(cfg), "want caller, thread or eal_lcores") != NULL);
  EXPECT(rdmagate_config_set(cfg, "yield_when_idle", "maybe") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "memory_windows", "no") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(rdmagate_config_error(cfg), "memory_windows = \"no\": want 0, 1, false or true") != NULL);
  EXPECT(rdmagate_config_set(cfg, "lcores", "1,,2") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "gateway", "10.0.0.1:0") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "gateway", "10.0.0.1:70000") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "gateway", "[fe80::1") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "gateway", "host.example:7471") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set_progress(cfg, 0) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set_progress(cfg, 4) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, NULL, "1") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "secret", "00112233445566778899aabbccddeeff") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(rdmagate_config_error(cfg), "secret: want \"hex:\" and 32..128 hex digits") != NULL);
  EXPECT(rdmagate_config_set(cfg, "secret", "hex:00112233") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set(cfg, "secret", "hex:0011223344556677889900aabbccddeeZZ") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set_credentials(cfg, NULL, "x", 1) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set_credentials(cfg, "p", NULL, 16) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_set_credentials(NULL, "p", NULL, 0) == RDMAGATE_INVALID_ARGUMENT);
  /* Accepted: every option and gateway spelling. */
  EXPECT(rdmagate_config_set(cfg, "principal", "app-writer") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "secret", "hex:00112233445566778899aabbccddeeff") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "secrets_file", "/etc/rdmagate/client-secrets.yaml") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_credentials(cfg, "app-writer", "0123456789abcdef", 16) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "progress", "thread") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_progress(cfg, RDMAGATE_PROGRESS_CALLER) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "cores", "1") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "queue_depth", "65535") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "request_timeout_ms", "2500") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "yield_when_idle", "true") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "memory_windows", "false") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "lcores", "1,2") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "eal_arg", "--no-huge") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "gateway", "[fe80::1]:7000") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "gateway", "::1") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "gateway", "10.0.0.1:7471") == RDMAGATE_OK);
  EXPECT(rdmagate_config_add_gateway(cfg, "10.0.0.2", 0) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_device(cfg, "") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_request_timeout_ms(cfg, 1000) == RDMAGATE_OK);
  rdmagate_config_free(cfg);
  EXPECT(rdmagate_config_set(NULL, "cores", "1") == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_config_add_gateway(NULL, "10.0.0.1", 1) == RDMAGATE_INVALID_ARGUMENT);
}

static void test_null_handles(void) {
  uint64_t size = 7;
  rdmagate_stats stats;
  char key = 'k';
  stats.struct_size = sizeof stats;
  EXPECT(rdmagate_put(NULL, &key, 1, "v", 1) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_get(NULL, &key, 1, NULL, 0, &size) == RDMAGATE_INVALID_ARGUMENT && size == 7);
  EXPECT(rdmagate_delete(NULL, &key, 1) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_delete_async(NULL, &key, 1, NULL, NULL) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_arm(NULL) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_event_fd(NULL) == -1);
  EXPECT(rdmagate_progress(NULL) == 0);
  EXPECT(rdmagate_buffer_alloc(NULL, 64) == NULL);
  EXPECT(rdmagate_client_stats(NULL, &stats) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_client_wait_connected(NULL, 1) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(rdmagate_client_auth_error(NULL, NULL, 0) == RDMAGATE_INVALID_ARGUMENT);
  rdmagate_client_destroy(NULL); /* a no-op, like free(NULL) */
}

static void test_create(void) {
  char err[512];
  rdmagate_client* client = (rdmagate_client*)&err; /* must be reset to NULL on failure */
  rdmagate_config* cfg = rdmagate_config_new();
  EXPECT(rdmagate_client_create(NULL, &client, err, sizeof err) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(client == NULL);
  EXPECT(strcmp(err, "rdmagate_client_create: config is NULL") == 0);
  EXPECT(rdmagate_client_create(cfg, NULL, err, sizeof err) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strstr(err, "client (the out pointer) is NULL") != NULL);

  EXPECT(rdmagate_client_create(cfg, &client, err, sizeof err) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(client == NULL);
  EXPECT(strcmp(err, "rdmagate_client_create: no gateway configured (rdmagate_config_add_gateway)") == 0);
  /* A short error buffer gets a truncated, terminated message. */
  EXPECT(rdmagate_client_create(cfg, &client, err, 8) == RDMAGATE_INVALID_ARGUMENT);
  EXPECT(strcmp(err, "rdmagat") == 0);

  /* A device that does not exist: setup fails, naming the reason (no RDMA here, or no such device). */
  EXPECT(rdmagate_config_add_gateway(cfg, "127.0.0.1", 7471) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_device(cfg, "no_such_rdma_device0") == RDMAGATE_OK);
  EXPECT(rdmagate_client_create(cfg, &client, err, sizeof err) == RDMAGATE_SETUP_FAILED);
  EXPECT(client == NULL);
  EXPECT(strstr(err, "no RDMA device") != NULL || strstr(err, "no_such_rdma_device0") != NULL);
  printf("c_api_test: create with an unknown device: %s\n", err);
  rdmagate_config_free(cfg);
}

/* Credentials are checked before any device is touched, so every refusal names its option here too. */
static int create_fails_with(rdmagate_config* cfg, const char* want) {
  char err[512];
  rdmagate_client* client = NULL;
  const int rc = rdmagate_client_create(cfg, &client, err, sizeof err);
  if (rc != RDMAGATE_SETUP_FAILED || client != NULL || strstr(err, want) == NULL) {
    fprintf(stderr, "create: rc %d, message \"%s\", want \"%s\"\n", rc, err, want);
    return 0;
  }
  return 1;
}

static void test_credentials(void) {
  static const char secret[16] = "0123456789abcde";
  char path[] = "/tmp/rdmagate-c-api-secrets-XXXXXX";
  FILE* f;
  int fd;
  rdmagate_config* cfg = rdmagate_config_new();
  EXPECT(rdmagate_config_add_gateway(cfg, "127.0.0.1", 7471) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_device(cfg, "no_such_rdma_device0") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_credentials(cfg, "bad name", secret, sizeof secret) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "principal \"bad name\" is not 1..64 bytes of [A-Za-z0-9._@-]"));
  EXPECT(rdmagate_config_set_credentials(cfg, "app", secret, 15) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "the secret of principal app is 15 bytes, want 16..64"));
  EXPECT(rdmagate_config_set_credentials(cfg, "", secret, sizeof secret) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "secret or secrets_file given without a principal"));
  EXPECT(rdmagate_config_set_credentials(cfg, "app", NULL, 0) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "the secret of principal app is 0 bytes"));
  EXPECT(rdmagate_config_set(cfg, "secrets_file", "/nonexistent/secrets.yaml") == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "client: secrets_file: cannot open /nonexistent/secrets.yaml"));
  EXPECT(rdmagate_config_set_credentials(cfg, "app", secret, sizeof secret) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "give the principal's secret or a secrets_file, not both"));

  fd = mkstemp(path); /* mode 0600 */
  EXPECT(fd >= 0);
  f = fdopen(fd, "w");
  fputs("secrets:\n  other: \"hex:000102030405060708090a0b0c0d0e0f\"\n", f);
  fclose(f);
  EXPECT(rdmagate_config_set_credentials(cfg, "app", NULL, 0) == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "secrets_file", path) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "has no secret for principal app"));
  EXPECT(rdmagate_config_set_credentials(cfg, "other", NULL, 0) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "no RDMA device") || create_fails_with(cfg, "no_such_rdma_device0"));
  EXPECT(chmod(path, 0644) == 0);
  EXPECT(create_fails_with(cfg, "has mode"));
  unlink(path);
  EXPECT(rdmagate_config_set(cfg, "max_message", "171") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set(cfg, "secrets_file", "") == RDMAGATE_OK);
  EXPECT(rdmagate_config_set_credentials(cfg, "other", secret, sizeof secret) == RDMAGATE_OK);
  EXPECT(create_fails_with(cfg, "max_message below 172 cannot carry the AUTH message"));
  rdmagate_config_free(cfg);
}

int main(void) {
  test_strerror();
  test_config();
  test_null_handles();
  test_create();
  test_credentials();
  if (failures != 0) {
    fprintf(stderr, "c_api_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
