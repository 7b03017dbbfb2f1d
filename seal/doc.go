// Package seal encrypts secrets the coordinator keeps at rest (cluster
// kubeconfigs in the Raft log and snapshots) with a key ring of AES-256-GCM
// keys, each named by an ID.
//
// # Key file
//
// A key ring is read from a key file, one key per line:
//
//	# comments and blank lines are ignored
//	<id> <base64 (standard, padded) of 32 random bytes>
//
// An ID is 1–64 characters of letters, digits, '-', '_' and '.'. The first
// key is the primary: Seal uses it. The others only open what was sealed
// with them, which is how keys rotate (docs/security.md). The file must not
// be readable or writable by group or others (mode 0600 or stricter):
// LoadKeyFile refuses it otherwise. WriteKeyFile and GenerateKeyFile write
// it 0600 through a temporary file and a rename.
//
// # Envelope
//
// A sealed secret is one line of text:
//
//	molt-sealed:v1:<key id>:<base64url, unpadded, of nonce ‖ ciphertext ‖ tag>
//
// with a random 12-byte GCM nonce per seal. The additional authenticated
// data is the envelope's header, "molt-sealed:v1:<key id>:", followed by
// the secret's purpose, e.g. "kubeconfig/<cluster>": a ciphertext moved to
// another purpose (another cluster) or relabelled with another key ID does
// not open. Opening fails with ErrUnknownKey when the ring lacks the key,
// and with ErrTampered when the ciphertext, its header or its purpose was
// changed.
package seal
