/*
 * rdmagate client, C API: PUT / GET / DELETE objects on rdmagate gateways over RDMA, synchronously or with a
 * completion callback, from C or any language with a C FFI. A thin layer over the C++ API
 * (<rdmagate/client.hpp>, rdmagate::client::Client); the semantics of every call are those of the C++ call
 * it names, documented there and in docs/client.md.
 *
 * C99; no DPDK or verbs header is needed. Link with -lrdmagate-client (pkg-config rdmagate-client, CMake
 * rdmagate::client).
 *
 * Stable ABI rules (SOVERSION 1, librdmagate-client.so.1):
 *  - Handles (rdmagate_config, rdmagate_client) are opaque: their layout is never part of the ABI.
 *  - Options are set through setters on rdmagate_config, never through a struct the caller allocates, so a new
 *    option is a new setter or a new name for rdmagate_config_set() (a minor version); an unknown name is
 *    refused with RDMAGATE_INVALID_ARGUMENT, so a program can probe for an option.
 *  - The one struct the caller allocates, rdmagate_stats, starts with its own size: the caller sets
 *    struct_size = sizeof(rdmagate_stats) as compiled, the library fills only the fields that fit. Fields are
 *    only ever appended (a minor version); none is removed, reordered or retyped.
 *  - Status codes 0..999 have the numbers of the C++ rdmagate::client::Status and 1000.. are this API's own;
 *    numbers never change meaning, new codes may appear in a minor version (rdmagate_strerror names every code
 *    and returns a generic text for one it does not know).
 *  - A minor version may add functions, options, status codes, enum values and stats fields (and raises
 *    RDMAGATE_C_API_VERSION); a function added later gets a new symbol version node (RDMAGATE_CLIENT_1.1, ...,
 *    client/rdmagate-client.map), so a program that uses it fails to load on an older library instead of
 *    failing at the call. Removing or changing the signature or meaning of any function, enum value or
 *    field bumps the SOVERSION.
 *  - Only symbols named rdmagate_* are exported from C (all under the version node RDMAGATE_CLIENT_1);
 *    every function returns a status or a documented value and no C++ exception ever leaves one of them.
 */
#ifndef RDMAGATE_CLIENT_H
#define RDMAGATE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define RDMAGATE_API __attribute__((visibility("default")))
#else
#define RDMAGATE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this C API's contract; bumped with each minor addition (an int for preprocessor checks). */
#define RDMAGATE_C_API_VERSION 3

/* Status codes. Functions return them as int. 0..22 are rdmagate::client::Status, number for number. */
enum rdmagate_status {
  RDMAGATE_OK = 0,
  RDMAGATE_NOT_FOUND = 1,          /* GET/DELETE: no such key */
  RDMAGATE_TOO_LARGE = 2,          /* PUT: value above the gateway's max value size */
  RDMAGATE_NO_SPACE = 3,           /* PUT: gateway store full */
  RDMAGATE_BAD_REQUEST = 4,        /* refused as malformed (or the key length is invalid: 1..250 bytes) */
  RDMAGATE_TOO_SMALL = 5,          /* GET: buffer too small; *size is the size needed, nothing was written */
  RDMAGATE_NO_RESOURCES = 6,       /* the gateway did not start the request (draining, busy); retry may work */
  RDMAGATE_BULK_FAILED = 7,        /* the gateway could not RDMA READ/WRITE the buffer */
  RDMAGATE_CONNECTION_LOST = 8,    /* the connection failed before the answer; outcome unknown */
  RDMAGATE_UNAVAILABLE = 9,        /* no connection to the key's gateway came up in time */
  RDMAGATE_TIMEOUT = 10,           /* no answer within the request timeout */
  RDMAGATE_BUSY = 11,              /* submission ring or request table full (retry); arm(): work pending */
  RDMAGATE_REGISTRATION = 12,      /* the buffer could not be registered with the RDMA device */
  RDMAGATE_SHUTDOWN = 13,          /* the client is shutting down */
  RDMAGATE_PROTOCOL = 14,          /* the gateway answered with something this client does not understand */
  RDMAGATE_STORE_UNAVAILABLE = 15, /* the gateway's backing store did not answer in time; retry may work */
  RDMAGATE_CORRUPT = 16,           /* the gateway found the stored value damaged; nothing was written */
  /* Since RDMAGATE_C_API_VERSION 2 (authentication, docs/client.md "Authentication"): */
  RDMAGATE_AUTH_REQUIRED = 17,         /* the gateway requires authentication; no credentials configured */
  RDMAGATE_AUTH_DENIED = 18,           /* the gateway refused the principal or its secret */
  RDMAGATE_AUTH_CONNECTION_LIMIT = 19, /* the principal holds its maximum connections; retry later */
  RDMAGATE_AUTH_GATEWAY_UNPROVEN = 20, /* the gateway failed to prove the shared secret: not trusted */
  RDMAGATE_FORBIDDEN = 21,             /* the principal lacks the permission for this operation */
  RDMAGATE_QUOTA_EXCEEDED = 22,        /* PUT: the tenant's byte or object quota would be exceeded */
  /* This API's own codes. */
  RDMAGATE_INVALID_ARGUMENT = 1000, /* a NULL handle or pointer, a bad option name or value, no gateway */
  RDMAGATE_SETUP_FAILED = 1001,     /* rdmagate_client_create failed (device, memory, EAL, ...): see errbuf */
  RDMAGATE_NO_MEMORY = 1002,        /* an allocation failed */
  RDMAGATE_INTERNAL = 1003          /* an unexpected internal error (a bug): please report it */
};

/* A short English description of a status code ("not found"); never NULL, for any int. */
RDMAGATE_API const char* rdmagate_strerror(int status);
/* The code's name without the prefix ("NOT_FOUND"), or "UNKNOWN". */
RDMAGATE_API const char* rdmagate_status_name(int status);

/* How the client makes progress (rdmagate::client::Progress). */
enum rdmagate_progress_mode {
  RDMAGATE_PROGRESS_CALLER = 1,    /* default: no EAL or hugepages; progress on the caller's thread */
  RDMAGATE_PROGRESS_THREAD = 2,    /* no EAL: one internal progress thread runs completions and callbacks */
  RDMAGATE_PROGRESS_EAL_LCORES = 3 /* DPDK EAL, hugepage pool, pinned polling lcores (high-rate clients) */
};

/* ---- Configuration ------------------------------------------------------------------------------------- */

typedef struct rdmagate_config rdmagate_config;

/* A configuration with the C++ defaults and no gateway; NULL when out of memory. */
RDMAGATE_API rdmagate_config* rdmagate_config_new(void);
RDMAGATE_API void rdmagate_config_free(rdmagate_config* config);

/* Appends a gateway: an IPv4 or IPv6 literal and a port (0: the default 7471). */
RDMAGATE_API int rdmagate_config_add_gateway(rdmagate_config* config, const char* address, uint16_t port);
RDMAGATE_API int rdmagate_config_set_progress(rdmagate_config* config, int mode);
RDMAGATE_API int rdmagate_config_set_device(rdmagate_config* config, const char* device);
RDMAGATE_API int rdmagate_config_set_request_timeout_ms(rdmagate_config* config, uint32_t ms);

/*
 * Any option by name, the value as text (how bindings pass options through). Names (ClientConfig's fields):
 *   gateway                  "ADDR" or "ADDR:PORT" or "[V6ADDR]:PORT"; appends, like add_gateway
 *   progress                 caller | thread | eal_lcores
 *   device                   ibv device name ("" = the only device)
 *   cores, connections_per_gateway, queue_depth, max_message, max_inflight_per_conn, pool_bytes
 *                            unsigned decimal integers
 *   request_timeout_ms, connect_timeout_ms
 *                            unsigned decimal integers (milliseconds)
 *   yield_when_idle          0 | 1 | false | true
 *   memory_windows           0 | 1 | false | true (default true: a type-2 window per chunked request
 *                            where the device has them; docs/client.md "Key scope"); version 3
 *   lcores                   comma-separated lcore ids ("" = the default)
 *   eal_arg                  appends one EAL argument
 *   principal                the principal to authenticate as (1..64 bytes of [A-Za-z0-9._@-]); version 2
 *   secret                   its secret as "hex:" followed by 32..128 hex digits; version 2
 *   secrets_file             a YAML secrets file in the gateway's format, readable by its owner only;
 *                            version 2
 * RDMAGATE_INVALID_ARGUMENT for an unknown name or a bad value; rdmagate_config_error() says which.
 */
RDMAGATE_API int rdmagate_config_set(rdmagate_config* config, const char* name, const char* value);
/* The message of the last setter that failed on this config ("" if none); valid until the next setter. */
RDMAGATE_API const char* rdmagate_config_error(const rdmagate_config* config);

/*
 * Credentials (RDMAGATE_C_API_VERSION 2): the principal to authenticate as and its secret (16..64 bytes,
 * copied). secret NULL with secret_len 0: the secret comes from the "secrets_file" option. Connections to a
 * gateway that requires authentication send AUTH first and carry no request until the gateway answered ok and
 * proved the same secret; refusals fail requests with the RDMAGATE_AUTH_* codes (see
 * rdmagate_client_auth_error).
 */
RDMAGATE_API int rdmagate_config_set_credentials(rdmagate_config* config, const char* principal,
                                                 const void* secret, size_t secret_len);

/* ---- Client -------------------------------------------------------------------------------------------- */

typedef struct rdmagate_client rdmagate_client;

/*
 * Creates a client (the config is copied and may be freed afterwards). On failure *client is NULL, the
 * status says why (RDMAGATE_INVALID_ARGUMENT, RDMAGATE_SETUP_FAILED, ...) and errbuf, when not NULL, holds a
 * NUL-terminated message of at most errlen - 1 bytes naming the option or call that failed.
 */
RDMAGATE_API int rdmagate_client_create(const rdmagate_config* config, rdmagate_client** client, char* errbuf,
                                        size_t errlen);
/* Fails what is still in flight with RDMAGATE_SHUTDOWN (their callbacks run), then frees the client. */
RDMAGATE_API void rdmagate_client_destroy(rdmagate_client* client);
/*
 * RDMAGATE_OK once every gateway has a connection up (authenticated when it asks for it), RDMAGATE_UNAVAILABLE
 * at the timeout; the RDMAGATE_AUTH_* code at once when a gateway refused our authentication.
 */
RDMAGATE_API int rdmagate_client_wait_connected(rdmagate_client* client, uint32_t timeout_ms);
/*
 * Why the latest authentication failure happened, naming the gateway (RDMAGATE_C_API_VERSION 2): copies a
 * NUL-terminated message of at most len - 1 bytes into buf ("" when none failed) and returns its status code
 * (RDMAGATE_OK when none failed).
 */
RDMAGATE_API int rdmagate_client_auth_error(const rdmagate_client* client, char* buf, size_t len);

/*
 * Synchronous requests; keys are 1..250 bytes of any value. rdmagate_get writes at most capacity bytes to
 * buffer and sets *size (may be NULL) to the value's size: the bytes written (RDMAGATE_OK) or the bytes
 * needed (RDMAGATE_TOO_SMALL).
 */
RDMAGATE_API int rdmagate_put(rdmagate_client* client, const void* key, size_t key_len, const void* value,
                              size_t size);
RDMAGATE_API int rdmagate_get(rdmagate_client* client, const void* key, size_t key_len, void* buffer,
                              size_t capacity, uint64_t* size);
RDMAGATE_API int rdmagate_delete(rdmagate_client* client, const void* key, size_t key_len);

/*
 * Asynchronous requests: RDMAGATE_OK means accepted, and callback(arg, status, size) runs exactly once
 * later (size as for rdmagate_get; for PUT, the bytes stored); any other status means refused, and the
 * callback never runs. The key is copied; the value or buffer must stay valid and untouched until the
 * callback ran. Where callbacks run: RDMAGATE_PROGRESS_CALLER inside rdmagate_progress() (or a sync call) on
 * the caller's thread; otherwise on the client's progress thread or lcore, where they must not block.
 */
typedef void (*rdmagate_callback)(void* arg, int status, uint64_t size);
RDMAGATE_API int rdmagate_put_async(rdmagate_client* client, const void* key, size_t key_len, const void* value,
                                    size_t size, rdmagate_callback callback, void* arg);
RDMAGATE_API int rdmagate_get_async(rdmagate_client* client, const void* key, size_t key_len, void* buffer,
                                    size_t capacity, rdmagate_callback callback, void* arg);
RDMAGATE_API int rdmagate_delete_async(rdmagate_client* client, const void* key, size_t key_len,
                                       rdmagate_callback callback, void* arg);

/*
 * Buffers. rdmagate_buffer_alloc returns registered memory (NULL when the pool is exhausted); free it with
 * rdmagate_buffer_free and the same size. Any other memory is registered on first use and stays registered
 * (pinned) until rdmagate_buffer_release(client, pointer into it) or the client's end: release memory that
 * was used in requests before freeing or unmapping it.
 */
RDMAGATE_API void* rdmagate_buffer_alloc(rdmagate_client* client, size_t bytes);
RDMAGATE_API void rdmagate_buffer_free(rdmagate_client* client, void* buffer, size_t bytes);
RDMAGATE_API void rdmagate_buffer_release(rdmagate_client* client, const void* data);

/*
 * Progress (RDMAGATE_PROGRESS_CALLER; the other modes progress on their own and these return 0, -1 and
 * RDMAGATE_OK). rdmagate_progress polls once and returns the number of completions run. To sleep: call
 * rdmagate_arm(); RDMAGATE_OK means armed, wait for rdmagate_event_fd() to become readable (poll, epoll,
 * select; never read it), then call rdmagate_progress(); RDMAGATE_BUSY means work is pending: progress first.
 */
RDMAGATE_API unsigned rdmagate_progress(rdmagate_client* client);
RDMAGATE_API int rdmagate_event_fd(const rdmagate_client* client);
RDMAGATE_API int rdmagate_arm(rdmagate_client* client);

/* Counters (rdmagate::client::ClientStats); set struct_size = sizeof(rdmagate_stats) before the call. */
typedef struct rdmagate_stats {
  size_t struct_size;
  uint64_t submitted;       /* requests accepted */
  uint64_t completed;       /* callbacks run / sync calls answered */
  uint64_t timeouts;        /* completed RDMAGATE_TIMEOUT */
  uint64_t connection_lost; /* completed RDMAGATE_CONNECTION_LOST */
  uint64_t busy;            /* refused RDMAGATE_BUSY */
  uint64_t reconnects;      /* connections re-established */
  uint64_t registrations;   /* buffers registered with the device */
  uint32_t connections_up;  /* connections up now */
  uint32_t reserved0;       /* zero; keeps the layout the same on every ABI */
  /* Since RDMAGATE_C_API_VERSION 2: */
  uint64_t auth_ok;         /* connections that authenticated */
  uint64_t auth_failures;   /* connections that failed authentication (any RDMAGATE_AUTH_* cause) */
  /* Since RDMAGATE_C_API_VERSION 3 (per-request keys, docs/client.md "Key scope"): */
  uint64_t window_requests;   /* chunked requests whose key was a memory window of their own */
  uint64_t unscoped_requests; /* chunked requests that handed out a registration's key (no windows) */
} rdmagate_stats;
RDMAGATE_API int rdmagate_client_stats(const rdmagate_client* client, rdmagate_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* RDMAGATE_CLIENT_H */
