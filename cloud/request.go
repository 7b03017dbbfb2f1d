package cloud

import (
	"crypto/sha256"
	"fmt"
)

// RequestID turns an action ID (deterministic, see phases.Action) and the
// call made for it into a UUID (version 5 form, SHA-256 based) that a
// provider accepts as an idempotency key: the same action repeating the
// same call, on any leader, sends the same ID.
func RequestID(actionID, call string) string {
	sum := sha256.Sum256([]byte("molt-request\x00" + actionID + "\x00" + call))
	b := sum[:16]
	b[6] = (b[6] & 0x0f) | 0x50 // version 5
	b[8] = (b[8] & 0x3f) | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
