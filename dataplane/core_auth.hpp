#pragma once
// The core loop's authentication gate (included by core_loop.hpp; docs/protocol.md §11, issue 14).
//
// A connection control marks AuthState::kAwaiting (the passive side of a session with auth_required) takes
// only NOOP and one AUTH until it is authenticated:
//   AUTH           the principal is looked up in the core's current AuthTable (CONFIG kAuthTable), the
//                  client proof checked, then the mechanism, then the principal's connection limit; the
//                  answer is AUTH_ANSWER ok with the gateway proof (the connection is open from then on,
//                  with the principal's tenant and permissions), or denied / connection_limit with a zero
//                  proof (the connection then waits for that answer's send to complete and fails
//                  kAuthDenied, so control disconnects only after the answer went out)
//   anything else  FAILED kProtocol (counted: auth_unauthenticated)
//   nothing        FAILED kAuthTimeout at auth_deadline_tsc (the timers, like the bulk deadline)
// A new table re-resolves every authenticated connection by principal name: gone, another tenant or fewer
// permissions fail it kRevoked; otherwise it is repointed at the new entry (and takes its permissions).
//
// The HMACs go through libcrypto, which allocates inside; they run once per connection (AUTH), never per
// request, so the per-request path keeps its no-allocation rule.

#include "dataplane/core_loop.hpp"
#include "protocol/auth.hpp"

namespace rdmagate::dataplane {

namespace detail {
// The key the proof of an unknown principal is checked against: the same HMAC work as for a known one,
// so the time of a denial does not tell which names exist. No secret: a proof cannot match it on purpose
// and still pass, because an unknown principal is denied whatever the comparison says.
inline constexpr std::array<std::uint8_t, 32> kDummySecret = {
    0x72, 0x64, 0x6d, 0x61, 0x67, 0x61, 0x74, 0x65, 0x2d, 0x6e, 0x6f, 0x2d, 0x73, 0x75, 0x63, 0x68,
    0x2d, 0x70, 0x72, 0x69, 0x6e, 0x63, 0x69, 0x70, 0x61, 0x6c, 0x2d, 0x6b, 0x65, 0x79, 0x2d, 0x31};

// One more connection of `p`, unless it holds max_connections already. The count is shared by every core
// (and survives table swaps: one usage object per name), so the limit is exact under concurrent AUTHs.
inline bool take_connection(const PrincipalEntry& p) noexcept {
  std::atomic<std::uint32_t>& n = p.usage->connections;
  std::uint32_t cur = n.load(std::memory_order_relaxed);
  do {
    if (p.max_connections != 0 && cur >= p.max_connections) return false;
  } while (!n.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  return true;
}
}  // namespace detail

// A message on a connection that is not open (dispatch_st's one branch led here).
template <typename B, typename S>
void CoreLoop<B, S>::auth_gate_st(CoreConn& c, const protocol::Message& m) noexcept {
  if (c.auth == AuthState::kDenied) return;  // the timers end it once the answer went out
  switch (m.type) {
    case protocol::MessageType::kNoop:  // credits only (the credit machine took them)
      return;
    case protocol::MessageType::kAuth:
      authenticate_st(c, m);
      return;
    default:
      ++cnt_.auth_unauthenticated;
      fail_st(c, FailureKind::kProtocol, kUnexpectedStatusBase + static_cast<std::uint32_t>(m.type));
      return;
  }
}

template <typename B, typename S>
void CoreLoop<B, S>::authenticate_st(CoreConn& c, const protocol::Message& m) noexcept {
  namespace auth = protocol::auth;
  const AuthTable* t = res_.auth_table;
  const PrincipalEntry* p = t != nullptr ? t->find(m.auth_principal) : nullptr;
  const auth::Transcript tr{c.session.peer_incarnation, c.session.local_incarnation, c.session.gateway_nonce,
                            m.auth_client_nonce, m.auth_principal};
  const std::span<const std::uint8_t> key = p != nullptr
                                                ? std::span<const std::uint8_t>(p->secret)
                                                : std::span<const std::uint8_t>(detail::kDummySecret);
  auth::Proof expected{};
  const bool computed = auth::compute_proof(auth::Role::kClient, key, tr, &expected);
  const bool proof_ok = auth::proofs_equal(expected, m.auth_proof);
  auth::AuthStatus status = auth::AuthStatus::kDenied;
  auth::Proof pg{};
  if (p != nullptr && computed && proof_ok &&
      m.auth_mechanism == static_cast<std::uint8_t>(auth::Mechanism::kHmacSha256)) {
    if (!detail::take_connection(*p)) {
      status = auth::AuthStatus::kConnectionLimit;
    } else if (auth::compute_proof(auth::Role::kGateway, p->secret, tr, &pg)) {
      status = auth::AuthStatus::kOk;
    } else {
      p->usage->connections.fetch_sub(1, std::memory_order_acq_rel);  // libcrypto failed: never expected
    }
  }
  const auto code = static_cast<std::uint32_t>(status);
  if (status == auth::AuthStatus::kOk) {
    c.principal = p;
    c.tenant_id = p->tenant->id;
    c.perms = p->perms;
    c.auth_usage = p->usage;  // released when the connection leaves the owned list
    c.auth = AuthState::kOpen;
    ++cnt_.auth_ok;
    // A failed send was counted by the send path (an engine fault: descriptors or encoding); the peer would
    // wait for an answer that never comes, so the connection goes.
    if (!send_built_st(c, protocol::make_auth_answer(m.cookie, code, pg)))
      fail_st(c, FailureKind::kAuthDenied, 0);
    return;
  }
  ++cnt_.auth_denied[code];
  c.auth = AuthState::kDenied;
  c.auth_denied_status = static_cast<std::uint8_t>(code);
  // The timers report FAILED when nothing of the connection is left on its send queue; signaled, the
  // answer's own completion says so (else the deadline does).
  c.auth_deadline_tsc = now_ + auth_timeout_tsc_;
  c.unsignaled = c.signal_interval;
  send_built_st(c, protocol::make_auth_answer(m.cookie, code, auth::Proof{}));
}

// The timers' check of a connection that is not open. True: it failed (and left the owned list).
template <typename B, typename S>
bool CoreLoop<B, S>::auth_expired_st(CoreConn& c) noexcept {
  if (c.auth == AuthState::kAwaiting) {
    if (now_ < c.auth_deadline_tsc) return false;
    ++cnt_.auth_timeouts;
    fail_st(c, FailureKind::kAuthTimeout, 0);
    return true;
  }
  // kDenied: the answer completed (or flushed) when the send queue is empty and nothing waits for credits.
  if (now_ < c.auth_deadline_tsc && (c.sq_inflight() != 0 || c.credits->queued_total() != 0)) return false;
  fail_st(c, FailureKind::kAuthDenied, c.auth_denied_status);
  return true;
}

// CONFIG kAuthTable. The table control published before stays alive until this core stores the new
// generation, so the names of the old entries are still readable while the connections are re-resolved.
template <typename B, typename S>
void CoreLoop<B, S>::apply_auth_table_st(const AuthTable* t) noexcept {
  res_.auth_table = t;
  for (std::size_t i = 0; i < owned_.size();) {
    CoreConn& c = *owned_[i];
    const std::uint32_t revoked = still_allowed_st(c, t);
    if (revoked == UINT32_MAX) {
      ++i;
      continue;
    }
    if (revoked == kRevokedPrincipal) {
      ++cnt_.revoked_principal;
    } else {
      ++cnt_.revoked_unauthenticated;
    }
    fail_st(c, FailureKind::kRevoked, revoked);  // removes owned_[i]
  }
  if (t != nullptr) res_.auth_applied.store(t->generation, std::memory_order_release);
}

// UINT32_MAX: `c` may go on under table `t` (an authenticated one now points into it); else the kRevoked
// status to fail it with.
template <typename B, typename S>
std::uint32_t CoreLoop<B, S>::still_allowed_st(CoreConn& c, const AuthTable* t) noexcept {
  if (c.principal == nullptr) {
    // Admitted without authentication while it was off; a table that requires it ends that. (A connection
    // awaiting its AUTH is checked against this table when the AUTH comes.)
    const bool unauthenticated = c.auth == AuthState::kOpen && !c.session.auth_required;
    return t != nullptr && t->required && unauthenticated ? kRevokedUnauthenticated : UINT32_MAX;
  }
  const PrincipalEntry* e = t != nullptr ? t->find(c.principal->name) : nullptr;
  if (e == nullptr || e->tenant->id != c.tenant_id || (c.perms & ~e->perms) != 0) return kRevokedPrincipal;
  c.principal = e;
  c.perms = e->perms;
  // Usage objects are per name for the life of the process, so this is the object the connection is counted
  // in; should a registry ever hand out another, the count moves with the connection.
  if (e->usage != c.auth_usage) {
    c.auth_usage->connections.fetch_sub(1, std::memory_order_acq_rel);
    e->usage->connections.fetch_add(1, std::memory_order_acq_rel);
    c.auth_usage = e->usage;
  }
  return UINT32_MAX;
}

}  // namespace rdmagate::dataplane
