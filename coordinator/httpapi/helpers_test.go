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

// fakeLeadership is embedded in fake members: it makes them a
// Leadership whose methods panic unless the fake defines them, and whose
// LeaderChanged answers nil (a fake cannot tell).
type fakeLeadership struct{ Leadership }

func (fakeLeadership) LeaderChanged() <-chan struct{} { return nil }

// servicesOf serves the API from fake m alone: each interface of
// Services the fake embeds or implements is m, the others are nil (a
// request that reaches one panics, and its test fails).
func servicesOf(m any) Services {
	var s Services
	s.Leadership, _ = m.(Leadership)
	s.Auth, _ = m.(Authenticator)
	s.Audit, _ = m.(AuditTrail)
	s.Relay, _ = m.(HeartbeatRelay)
	s.Releases, _ = m.(ReleaseService)
	s.Clusters, _ = m.(ClusterService)
	s.Upgrades, _ = m.(UpgradeService)
	s.Preflights, _ = m.(PreflightService)
	s.Maintenance, _ = m.(MaintenanceService)
	s.Scheduler, _ = m.(SchedulerService)
	s.Members, _ = m.(MemberService)
	s.Credentials, _ = m.(CredentialService)
	s.Secrets, _ = m.(SecretService)
	s.Agents, _ = m.(AgentService)
	return s
}

// tokensOnly is a member that only authenticates testToken.
type tokensOnly struct {
	fakeLeadership
	Authenticator
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
func (m *beatMember) ReadIndex(context.Context) (uint64, error)    { return 0, nil }
