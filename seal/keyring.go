package seal

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Errors, each naming the rule that refused. They are wrapped with
// details; test them with errors.Is.
var (
	// ErrBadKeyFile: a key file's line is not "<id> <base64 key>", an ID
	// repeats, or the file holds no key.
	ErrBadKeyFile = errors.New("seal: bad key file")
	// ErrBadKeyID: an ID is empty, too long, or has other characters than
	// letters, digits, '-', '_' and '.'.
	ErrBadKeyID = errors.New("seal: bad key id")
	// ErrBadKeyLength: a key is not 32 bytes (AES-256).
	ErrBadKeyLength = errors.New("seal: bad key length (want 32 bytes, AES-256)")
	// ErrKeyFileMode: the key file is readable or writable by group or
	// others.
	ErrKeyFileMode = errors.New("seal: key file is accessible by group or others (want mode 0600)")
	// ErrNotSealed: the text is not a sealed envelope of a version this
	// package reads.
	ErrNotSealed = errors.New("seal: not a sealed secret")
	// ErrUnknownKey: the envelope names a key the ring does not hold.
	ErrUnknownKey = errors.New("seal: unknown key id")
	// ErrTampered: the ciphertext does not authenticate: it, its header or
	// its purpose was changed.
	ErrTampered = errors.New("seal: ciphertext does not authenticate (tampered, or sealed for another purpose)")
)

// Prefix starts every sealed secret of envelope version 1.
const Prefix = "molt-sealed:v1:"

// KeySize is the length of a key: AES-256.
const KeySize = 32

const maxIDLen = 64

// Key is one key of a ring.
type Key struct {
	ID     string
	Secret []byte // KeySize bytes
}

type ringKey struct {
	Key
	aead cipher.AEAD
}

// Keyring holds keys by ID; the first is the primary, which seals. It is
// safe for concurrent use (it never changes once built).
type Keyring struct {
	keys []ringKey
	byID map[string]*ringKey
}

// NewKeyring builds a ring; keys[0] is the primary.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrBadKeyFile)
	}
	r := &Keyring{keys: make([]ringKey, len(keys)), byID: map[string]*ringKey{}}
	for i, k := range keys {
		if err := checkID(k.ID); err != nil {
			return nil, err
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("%w: key %s has %d bytes", ErrBadKeyLength, k.ID, len(k.Secret))
		}
		if _, dup := r.byID[k.ID]; dup {
			return nil, fmt.Errorf("%w: key id %s appears twice", ErrBadKeyFile, k.ID)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("seal: key %s: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %s: %w", k.ID, err)
		}
		r.keys[i] = ringKey{Key: Key{ID: k.ID, Secret: bytes.Clone(k.Secret)}, aead: aead}
		r.byID[k.ID] = &r.keys[i]
	}
	return r, nil
}

func checkID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: %q: 1 to %d characters", ErrBadKeyID, id, maxIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: %q: only letters, digits, '-', '_' and '.'", ErrBadKeyID, id)
		}
	}
	return nil
}

// GenerateKey returns a new random key with a random ID ("k-" and 8 hex
// digits).
func GenerateKey() Key {
	var id [4]byte
	secret := make([]byte, KeySize)
	// crypto/rand.Read never fails (Go 1.24+: it crashes the program
	// instead when the system has no randomness).
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret)
	return Key{ID: "k-" + hex.EncodeToString(id[:]), Secret: secret}
}

// Primary returns the ID of the key that seals.
func (r *Keyring) Primary() string { return r.keys[0].ID }

// IDs lists the ring's key IDs, primary first.
func (r *Keyring) IDs() []string {
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.ID
	}
	return out
}

// WithPrimary returns a ring with k as its primary, followed by r's keys.
func (r *Keyring) WithPrimary(k Key) (*Keyring, error) {
	keys := []Key{k}
	for _, o := range r.keys {
		keys = append(keys, o.Key)
	}
	return NewKeyring(keys...)
}

// Without returns a ring without the key id (which must not be the only
// one).
func (r *Keyring) Without(id string) (*Keyring, error) {
	var keys []Key
	for _, o := range r.keys {
		if o.ID != id {
			keys = append(keys, o.Key)
		}
	}
	return NewKeyring(keys...)
}

// Seal encrypts plaintext with the primary key for purpose, which must be
// given again to Open.
func (r *Keyring) Seal(plaintext []byte, purpose string) string {
	k := &r.keys[0]
	header := Prefix + k.ID + ":"
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	out := k.aead.Seal(nonce, nonce, plaintext, []byte(header+purpose))
	return header + base64.RawURLEncoding.EncodeToString(out)
}

// IsSealed reports whether s has the form of a sealed secret (it may still
// fail to open).
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// KeyID returns the ID of the key a sealed secret names.
func KeyID(sealed string) (string, error) {
	id, _, err := split(sealed)
	return id, err
}

func split(sealed string) (id, body string, err error) {
	rest, ok := strings.CutPrefix(sealed, Prefix)
	if !ok {
		return "", "", fmt.Errorf("%w: no %q prefix", ErrNotSealed, Prefix)
	}
	id, body, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", fmt.Errorf("%w: no key id", ErrNotSealed)
	}
	if err := checkID(id); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNotSealed, err)
	}
	return id, body, nil
}

// Open decrypts a sealed secret for purpose, with whichever key of the
// ring it names.
func (r *Keyring) Open(sealed, purpose string) ([]byte, error) {
	id, body, err := split(sealed)
	if err != nil {
		return nil, err
	}
	k, ok := r.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s (this key ring holds %s)", ErrUnknownKey, id, strings.Join(r.IDs(), ", "))
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: malformed body", ErrTampered)
	}
	n := k.aead.NonceSize()
	pt, err := k.aead.Open(nil, raw[:n], raw[n:], []byte(Prefix+id+":"+purpose))
	if err != nil {
		return nil, fmt.Errorf("%w: key %s, purpose %s", ErrTampered, id, purpose)
	}
	return pt, nil
}

// Marshal writes the ring in the key file format.
func (r *Keyring) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString("# molt encryption keys: \"<id> <base64 32 bytes>\"; the first seals, every one opens (docs/security.md)\n")
	for _, k := range r.keys {
		fmt.Fprintf(&b, "%s %s\n", k.ID, base64.StdEncoding.EncodeToString(k.Secret))
	}
	return b.Bytes()
}

// Parse reads a ring from the key file format.
func Parse(data []byte) (*Keyring, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want \"<id> <base64 key>\"", ErrBadKeyFile, n)
		}
		secret, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: key %s is not base64: %v", ErrBadKeyFile, n, f[0], err)
		}
		keys = append(keys, Key{ID: f[0], Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKeyFile, err)
	}
	return NewKeyring(keys...)
}
