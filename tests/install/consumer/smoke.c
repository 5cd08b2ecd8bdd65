/* The installed C API, loaded and called without a gateway: librdmagate-client.so.1 resolves with all its own
   dependencies, its versioned symbols bind, and a client without a gateway is refused with a message. */
#include <rdmagate/client.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  const char* name = rdmagate_status_name(RDMAGATE_NOT_FOUND);
  if (strcmp(name, "NOT_FOUND") != 0) {
    fprintf(stderr, "rdmagate_status_name(RDMAGATE_NOT_FOUND) = \"%s\", want \"NOT_FOUND\"\n", name);
    return 1;
  }
  rdmagate_config* config = rdmagate_config_new();
  if (config == NULL) {
    fprintf(stderr, "rdmagate_config_new returned NULL\n");
    return 1;
  }
  rdmagate_client* client = NULL;
  char err[256] = "";
  const int rc = rdmagate_client_create(config, &client, err, sizeof err);
  rdmagate_config_free(config);
  if (rc != RDMAGATE_INVALID_ARGUMENT || client != NULL || strstr(err, "gateway") == NULL) {
    fprintf(stderr,
            "rdmagate_client_create without a gateway: %s (%d), \"%s\"; want INVALID_ARGUMENT naming the "
            "gateway\n",
            rdmagate_status_name(rc), rc, err);
    return 1;
  }
  printf("smoke_c: %s; %s\n", name, err);
  return 0;
}
