#pragma once
// Error codes of the wire protocol. Values are stable: the engine indexes per-connection counters
// with them and the reject reasons travel on the wire. Append, never renumber.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rdmagate::protocol {

// Why an acceptor refused a connection; carried in the reject body (wire codes).
enum class RejectReason : std::uint8_t {
  kNone = 0,                 // not a reject; never on the wire
  kRace = 1,                 // both sides connected at once and you lost the tie-break
  kNoResources = 2,          // out of memory, QPs or connection slots; retry later
  kFatal = 3,                // anything else; do not retry without operator action
  kIncompatibleVersion = 4,  // major differs or no common minor
  kStale = 5,                // your request names an incarnation of mine that no longer exists
  kFragmentsMismatch = 6,    // negotiated fragment count would fall below my minimum
  kQueueSizeMismatch = 7,    // negotiated queue depth would fall below my minimum
  kNotAllowed = 8,           // policy (address or service) refuses you
  kBadPrivateData = 9,       // your private data is short, malformed or has nonsense parameters
  kBadConnParam = 10,        // your rdma_cm parameters are refused: rnr_retry_count 7 (retry forever) or
                             // responder_resources 0; do not retry without changing them
  kSourceLimit = 11,         // too many connections or connection requests from your address; retry later
  kAuthRequired = 12,        // authentication is required and your mask has no minor >= 2 (or your max
                       // message size cannot carry AUTH); do not retry without a client that authenticates
};
inline constexpr std::uint8_t kRejectReasonMax = 12;

// Why a handshake body could not be decoded or a handshake could not complete.
enum class HandshakeError : std::uint8_t {
  kOk = 0,                   // no error
  kTooShort = 1,             // fewer bytes than the body needs
  kBadMagic = 2,             // not an rdmagate handshake body
  kWrongKind = 3,            // e.g. a reject where an accept was expected
  kMinorNotInMask = 4,       // the sender's own minor is missing from its own mask
  kIncompatibleVersion = 5,  // major differs, no common minor, or the accept chose one we lack
  kZeroIncarnation = 6,      // incarnation stamps are never zero
  kBadParameter = 7,         // a zero or nonsense parameter (depth, sizes, fragments)
  kUnknownRejectReason = 8,  // reason code outside the table (or zero) in a reject
  kParameterRaised = 9,      // the accept granted more than we offered (clamping only lowers)
  kStaleIncarnation = 10,    // the accept is addressed to another incarnation of us or of the peer
  kBadFlags = 11,            // unknown flag bits in an accept, or checksum refused after we asked
  kBelowMinimum = 12,        // the accepted depth or fragment count is below our configured minimum
  kBufferTooSmall = 13,      // encode: the output buffer cannot hold the body
};
inline constexpr std::uint8_t kHandshakeErrorMax = 13;

// Why a message could not be decoded (or, for the few marked so, encoded). Every decode failure
// closes the connection; the engine counts each code separately.
enum class WireError : std::uint8_t {
  kOk = 0,                     // no error
  kTruncatedHeader = 1,        // fewer received bytes than a header
  kBadMagic = 2,               // header magic is not 'R' 'G'
  kBadVersion = 3,             // header version is not the negotiated one
  kUnknownType = 4,            // type byte outside the table
  kLengthTooSmall = 5,         // length field below the fixed size of the type
  kLengthExceedsMax = 6,       // length field above the negotiated max message size
  kLengthExceedsReceived = 7,  // length field above the bytes actually received (truncated)
  kTrailingBytes = 8,          // more bytes received than the length field says
  kBadChecksum = 9,            // CRC32C mismatch (checksum negotiated on)
  kUnexpectedChecksum = 10,    // nonzero checksum field while checksums are off
  kStaleSource = 11,           // source stamp is not the peer incarnation from the handshake
  kStaleDestination = 12,      // destination stamp is not our incarnation
  kCreditsOverflow = 13,       // returned credits above the negotiated queue depth
  kReservedNotZero = 14,       // a reserved field (or NOOP opcode/cookie) is not zero
  kNoFragments = 15,           // chunk request with zero fragments
  kTooManyFragments = 16,      // fragment count above the negotiated maximum
  kFragmentsTruncated = 17,    // fragment list runs past the length field
  kEmptyFragment = 18,         // a fragment of length zero
  kFragmentWraps = 19,         // addr + len wraps past 2^64
  kBulkTooLarge = 20,          // sum of fragment lengths above the negotiated max bulk size
  kByteCountTooLarge = 21,     // completion byte count above the negotiated max bulk size
  kUnexpectedPayload = 22,     // a NOOP or completion longer than its fixed size
  kBufferTooSmall = 23,        // encode only: output buffer too small for the message
  kBadAuthField = 24,          // AUTH: name length outside 1..64 or a byte outside [A-Za-z0-9._@-];
                               // AUTH_ANSWER: status above 3, or a nonzero proof with a status other than ok
};
inline constexpr std::uint8_t kWireErrorMax = 24;
inline constexpr std::size_t kWireErrorCount = kWireErrorMax + 1;  // size of a counter array

// Result of an encode: bytes written, or the reason nothing usable was written.
template <class Error>
struct Encoded {
  std::size_t size = 0;      // bytes written on success, 0 otherwise
  Error error = Error::kOk;  // kOk on success
  constexpr bool ok() const { return error == Error::kOk; }
};

constexpr std::string_view to_string(RejectReason r) {
  switch (r) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kRace:
      return "race";
    case RejectReason::kNoResources:
      return "no_resources";
    case RejectReason::kFatal:
      return "fatal";
    case RejectReason::kIncompatibleVersion:
      return "incompatible_version";
    case RejectReason::kStale:
      return "stale";
    case RejectReason::kFragmentsMismatch:
      return "fragments_mismatch";
    case RejectReason::kQueueSizeMismatch:
      return "queue_size_mismatch";
    case RejectReason::kNotAllowed:
      return "not_allowed";
    case RejectReason::kBadPrivateData:
      return "bad_private_data";
    case RejectReason::kBadConnParam:
      return "bad_conn_param";
    case RejectReason::kSourceLimit:
      return "source_limit";
    case RejectReason::kAuthRequired:
      return "auth_required";
  }
  return "unknown";
}

constexpr std::string_view to_string(HandshakeError e) {
  switch (e) {
    case HandshakeError::kOk:
      return "ok";
    case HandshakeError::kTooShort:
      return "too_short";
    case HandshakeError::kBadMagic:
      return "bad_magic";
    case HandshakeError::kWrongKind:
      return "wrong_kind";
    case HandshakeError::kMinorNotInMask:
      return "minor_not_in_mask";
    case HandshakeError::kIncompatibleVersion:
      return "incompatible_version";
    case HandshakeError::kZeroIncarnation:
      return "zero_incarnation";
    case HandshakeError::kBadParameter:
      return "bad_parameter";
    case HandshakeError::kUnknownRejectReason:
      return "unknown_reject_reason";
    case HandshakeError::kParameterRaised:
      return "parameter_raised";
    case HandshakeError::kStaleIncarnation:
      return "stale_incarnation";
    case HandshakeError::kBadFlags:
      return "bad_flags";
    case HandshakeError::kBelowMinimum:
      return "below_minimum";
    case HandshakeError::kBufferTooSmall:
      return "buffer_too_small";
  }
  return "unknown";
}

constexpr std::string_view to_string(WireError e) {
  switch (e) {
    case WireError::kOk:
      return "ok";
    case WireError::kTruncatedHeader:
      return "truncated_header";
    case WireError::kBadMagic:
      return "bad_magic";
    case WireError::kBadVersion:
      return "bad_version";
    case WireError::kUnknownType:
      return "unknown_type";
    case WireError::kLengthTooSmall:
      return "length_too_small";
    case WireError::kLengthExceedsMax:
      return "length_exceeds_max";
    case WireError::kLengthExceedsReceived:
      return "length_exceeds_received";
    case WireError::kTrailingBytes:
      return "trailing_bytes";
    case WireError::kBadChecksum:
      return "bad_checksum";
    case WireError::kUnexpectedChecksum:
      return "unexpected_checksum";
    case WireError::kStaleSource:
      return "stale_source";
    case WireError::kStaleDestination:
      return "stale_destination";
    case WireError::kCreditsOverflow:
      return "credits_overflow";
    case WireError::kReservedNotZero:
      return "reserved_not_zero";
    case WireError::kNoFragments:
      return "no_fragments";
    case WireError::kTooManyFragments:
      return "too_many_fragments";
    case WireError::kFragmentsTruncated:
      return "fragments_truncated";
    case WireError::kEmptyFragment:
      return "empty_fragment";
    case WireError::kFragmentWraps:
      return "fragment_wraps";
    case WireError::kBulkTooLarge:
      return "bulk_too_large";
    case WireError::kByteCountTooLarge:
      return "byte_count_too_large";
    case WireError::kUnexpectedPayload:
      return "unexpected_payload";
    case WireError::kBufferTooSmall:
      return "buffer_too_small";
    case WireError::kBadAuthField:
      return "bad_auth_field";
  }
  return "unknown";
}

}  // namespace rdmagate::protocol
