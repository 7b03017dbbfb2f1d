package httpapi

import (
	"context"
	"net/http"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// adminTokens is embedded in fake members: it accepts testToken
// (consistency_test.go) as an admin's API token and nothing else.
type adminTokens struct{}

func (adminTokens) AuthenticateToken(tok string) (api.Token, error) {
	if tok != testToken {
		return api.Token{}, coordinator.ErrUnauthorized
	}
	return api.Token{ID: "abcdef", Kind: api.TokenAPI, Role: string(RoleAdmin)}, nil
}

// tokensOnly is a member that only authenticates testToken.
type tokensOnly struct {
	Service
	adminTokens
}

// IsLeader: it answers what it is asked itself.
func (m *tokensOnly) IsLeader() bool       { return true }
func (m *tokensOnly) AppliedIndex() uint64 { return 0 }

func (m *tokensOnly) AuthenticateToken(tok string) (api.Token, error) {
	return m.adminTokens.AuthenticateToken(tok)
}

// asAdmin sends every request with testToken.
func asAdmin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+testToken)
		}
		h.ServeHTTP(w, r)
	})
}

// The fake members lead (or, forwarding, ask a leader that is another
// fake): their read index is what they have applied, since they never
// trail themselves.

func (m *indexedMember) ReadIndex(context.Context) (uint64, error) { return m.applied.Load(), nil }
func (m *webMember) ReadIndex(context.Context) (uint64, error)     { return m.AppliedIndex(), nil }
func (m *auditMember) ReadIndex(context.Context) (uint64, error)   { return 0, nil }
func (m *panickyMember) ReadIndex(context.Context) (uint64, error) { return 0, nil }
func (m *tokensOnly) ReadIndex(context.Context) (uint64, error)    { return 0, nil }
func (m *pollingMember) ReadIndex(context.Context) (uint64, error) { return 0, nil }
func (m *beatMember) ReadIndex(context.Context) (uint64, error)    { return 0, nil }
