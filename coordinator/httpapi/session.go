package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// Web sessions (docs/security.md, "The web view"). The web view signs in
// with an API token once (POST /v1/session, the token as bearer
// credential); the member answers with an HttpOnly cookie whose value is
// a random session ID, and keeps, in its memory only, which token the ID
// stands for. A request that carries the cookie and no Authorization
// header is authenticated as that token, through the same
// AuthenticateToken a bearer token goes through (an expired, used-up or
// deleted token ends its sessions), and gets the token's role. A write
// (any method but GET and HEAD) authenticated by the cookie must also
// carry the session's CSRF value in api.CSRFHeader and, when the browser
// sends Origin, come from this member's own origin.
//
// Sessions live on the member that made them: another member, or this
// one after a restart, does not know the cookie and answers 401
// (session-unknown), and the page signs in again.

// Defaults of the session settings in Config.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultMaxSessions = 10000
)

// session is what a session ID stands for.
type session struct {
	token   string // the API token, "<id>.<secret>"
	csrf    string
	expires time.Time
}

// sessionStore maps session IDs (kept as their SHA-256, so that the map
// holds nothing a cookie could be made from) to sessions.
type sessionStore struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu   sync.Mutex
	byID map[[32]byte]*session
}

func newSessionStore(now func() time.Time, ttl time.Duration, max int) *sessionStore {
	return &sessionStore{now: now, ttl: ttl, max: max, byID: map[[32]byte]*session{}}
}

func randomValue() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create stores a session for token that ends at the store's TTL or at
// notAfter (the token's own expiry), whichever comes first, and returns
// its ID and the session.
func (s *sessionStore) create(token string, notAfter time.Time) (string, session, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		for k, v := range s.byID {
			if !now.Before(v.expires) {
				delete(s.byID, k)
			}
		}
	}
	if len(s.byID) >= s.max {
		return "", session{}, &coordinator.RuleError{Rule: "session-limit",
			Detail: fmt.Sprintf("this member holds %d web sessions, its maximum; sign out elsewhere or wait for one to end", s.max), Err: errTooManySessions}
	}
	exp := now.Add(s.ttl)
	if !notAfter.IsZero() && notAfter.Before(exp) {
		exp = notAfter
	}
	id := randomValue()
	sess := session{token: token, csrf: randomValue(), expires: exp}
	s.byID[sha256.Sum256([]byte(id))] = &sess
	return id, sess, nil
}

// lookup returns the live session of id; an expired one is dropped.
func (s *sessionStore) lookup(id string) (session, bool) {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[key]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(sess.expires) {
		delete(s.byID, key)
		return session{}, false
	}
	return *sess, true
}

func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	delete(s.byID, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

// safeMethod: methods a session cookie may use without the CSRF header.
func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sessionPrincipal authenticates a request by its session cookie (called
// when it has no Authorization header and no client certificate). ok is
// false when the request carries no session cookie.
func (h *handlers) sessionPrincipal(r *http.Request) (p Principal, ok bool, err error) {
	if h.sessions == nil {
		return Principal{}, false, nil
	}
	c, cerr := r.Cookie(api.SessionCookie)
	if cerr != nil || c.Value == "" {
		return Principal{}, false, nil
	}
	unauthorized := func(rule, detail string) error {
		return &coordinator.RuleError{Rule: rule, Detail: detail, Err: coordinator.ErrUnauthorized}
	}
	sess, found := h.sessions.lookup(c.Value)
	if !found {
		return Principal{}, true, unauthorized("session-unknown", "the web session is unknown to this member or has ended: sign in again")
	}
	if !safeMethod(r.Method) {
		forbid := func(rule, detail string) error {
			return &coordinator.RuleError{Rule: rule, Detail: detail, Err: coordinator.ErrForbidden}
		}
		got := r.Header.Get(api.CSRFHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			return Principal{}, true, forbid("csrf", fmt.Sprintf("%s %s with a session cookie needs the session's %s header", r.Method, r.URL.Path, api.CSRFHeader))
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, perr := url.Parse(o)
			if perr != nil || !strings.EqualFold(u.Host, r.Host) {
				return Principal{}, true, forbid("csrf-origin", fmt.Sprintf("a write with a session cookie from origin %q, not this member's", o))
			}
		}
	}
	t, aerr := h.authn.AuthenticateToken(sess.token)
	if aerr != nil {
		h.sessions.delete(c.Value)
		return Principal{}, true, aerr
	}
	p = tokenPrincipal(t)
	p.session, p.token = c.Value, sess.token
	return p, true, nil
}

func tokenPrincipal(t api.Token) Principal {
	name := "token:" + t.ID
	if t.Description != "" {
		name += " (" + t.Description + ")"
	}
	return Principal{Kind: KindOperator, Name: name, Role: Role(t.Role)}
}

func setSessionCookie(w http.ResponseWriter, value string, remove bool) {
	c := &http.Cookie{Name: api.SessionCookie, Value: value, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if remove {
		c.Value, c.MaxAge = "", -1
	}
	http.SetCookie(w, c)
}

// createSession is POST /v1/session: the caller's bearer token becomes a
// session cookie on this member.
func (h *handlers) createSession(w http.ResponseWriter, r *http.Request) {
	p := PrincipalFrom(r.Context())
	tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if p.Kind != KindOperator || !bearer || p.session != "" {
		writeProblem(w, r, &coordinator.RuleError{Rule: "session-needs-token",
			Detail: "sign in with an API token as bearer credential (Authorization: Bearer <token>)", Err: coordinator.ErrUnauthorized})
		return
	}
	t, err := h.authn.AuthenticateToken(tok)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	id, sess, err := h.sessions.create(tok, t.Expires)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	setSessionCookie(w, id, false)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, api.Session{Name: p.Name, Role: string(p.Role), CSRF: sess.csrf, Expires: sess.expires})
}

// getSession is GET /v1/session: who the caller is and, for a session
// cookie, the CSRF value its writes carry.
func (h *handlers) getSession(w http.ResponseWriter, r *http.Request) {
	p := PrincipalFrom(r.Context())
	out := api.Session{Name: p.Name, Role: string(p.Role)}
	if p.session != "" {
		if sess, ok := h.sessions.lookup(p.session); ok {
			out.CSRF, out.Expires = sess.csrf, sess.expires
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// deleteSession is DELETE /v1/session: sign out (the cookie's session
// ends on this member and the cookie is removed).
func (h *handlers) deleteSession(w http.ResponseWriter, r *http.Request) {
	if id := PrincipalFrom(r.Context()).session; id != "" {
		h.sessions.delete(id)
	}
	setSessionCookie(w, "", true)
	w.WriteHeader(http.StatusNoContent)
}
