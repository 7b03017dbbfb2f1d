package trust

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"regexp"
)

// Tokens are "<id>.<secret>" of lower-case letters and digits: a bootstrap
// token, with which an agent enrolls, has kubeadm's form
// [a-z0-9]{6}.[a-z0-9]{16}; an operator's API token has a 32-character
// secret because it lives long. The ID is public (it names the token in
// lists and the audit log); only a hash of the secret is stored.
const (
	tokenIDLen         = 6
	BootstrapSecretLen = 16
	APISecretLen       = 32
)

var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16}|[a-z0-9]{32})$`)

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewToken makes a token with a secret of secretLen characters.
func NewToken(secretLen int) (token, id string) {
	s := randomString(tokenIDLen + secretLen)
	return s[:tokenIDLen] + "." + s[tokenIDLen:], s[:tokenIDLen]
}

// ParseToken splits a token into its ID and secret, checking its form.
func ParseToken(token string) (id, secret string, err error) {
	m := tokenRE.FindStringSubmatch(token)
	if m == nil {
		return "", "", fmt.Errorf("token: want [a-z0-9]{6}.[a-z0-9]{16} (bootstrap) or [a-z0-9]{6}.[a-z0-9]{32} (API)")
	}
	return m[1], m[2], nil
}

// HashSecret is the stored form of a token's secret. The secrets are 82 or
// 165 random bits, so a plain SHA-256 resists guessing without a slow hash.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte("molt-token-v1:" + secret))
	return hex.EncodeToString(sum[:])
}

// SecretMatches compares a presented secret against a stored hash in
// constant time.
func SecretMatches(secret, hash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(hash)) == 1
}

func randomString(n int) string {
	b := make([]byte, n)
	// Rejection sampling keeps every character equally likely.
	out := make([]byte, 0, n)
	for len(out) < n {
		if _, err := rand.Read(b); err != nil {
			panic(err)
		}
		for _, c := range b {
			if c < 252 && len(out) < n { // 252 = 7 × 36
				out = append(out, tokenAlphabet[int(c)%len(tokenAlphabet)])
			}
		}
	}
	return string(out)
}
