package statemachine

import (
	"slices"
	"sort"
	"time"
)

// Queries of credentials (trust.go).

// Token returns a stored token by ID.
func (f *Machine) Token(id string) (TokenRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.Tokens[id]
	if !ok {
		return TokenRecord{}, false
	}
	return *t, true
}

// Tokens returns every stored token, by ID.
func (f *Machine) Tokens() []TokenRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TokenRecord, 0, len(f.st.Tokens))
	for _, t := range f.st.Tokens {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CheckToken checks a token against the rules at now (see state.checkToken).
func (f *Machine) CheckToken(id, kind string, now time.Time) (TokenRecord, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, err := f.st.checkToken(id, kind, now)
	if err != nil {
		return TokenRecord{}, err
	}
	return *t, nil
}

// CheckEnroll checks an enrollment against the rules at now, before the
// leader signs anything.
func (f *Machine) CheckEnroll(tokenID, cluster, node string, now time.Time) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, _, err := f.st.checkEnroll(tokenID, cluster, node, now)
	return err
}

// AgentCertValid reports whether the certificate with serial (hex) is a
// current certificate of the node: the node is in its cluster's spec and
// the serial is one of the node's newest.
func (f *Machine) AgentCertValid(cluster, node, serial string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Clusters[cluster]
	return ok && r.Spec.HasNode(node) && slices.Contains(r.AgentCerts[node], serial)
}
