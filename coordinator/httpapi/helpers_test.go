package httpapi

import (
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
