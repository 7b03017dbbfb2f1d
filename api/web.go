package api

import "time"

// The wire types below serve the web view (package web): its session and
// the reads its pages need beyond the resources every client reads.

// Session describes the caller of GET, POST and DELETE /v1/session: the
// web view's sign-in. POST /v1/session with an API token as bearer
// credential answers with a Session and sets the session cookie
// (SessionCookie) that stands for the token on this member.
type Session struct {
	// Name is the token's name as the audit trail shows it
	// ("token:<id> (<description>)"); Role its role.
	Name string `json:"name"`
	Role string `json:"role"`
	// CSRF is the value a request authenticated by the session cookie
	// must send in CSRFHeader with any method but GET and HEAD. Empty when
	// the caller authenticated with a bearer token.
	CSRF string `json:"csrf,omitempty"`
	// Expires is when the session ends (zero for a bearer caller).
	Expires time.Time `json:"expires,omitzero"`
}

// SessionCookie is the web view's session cookie: HttpOnly, Secure,
// SameSite=Strict, Path=/, without Max-Age (the browser drops it when it
// closes). Its value means nothing but to the member that set it.
const SessionCookie = "__Host-molt-session"

// CSRFHeader carries Session.CSRF on writes authenticated by the session
// cookie.
const CSRFHeader = "X-Molt-CSRF"

// PreflightRunSummary is a stored preflight run without its host
// operations and results (GET /v1/clusters/{name}/preflight lists them).
type PreflightRunSummary struct {
	ID         string    `json:"id"`
	Cluster    string    `json:"cluster"`
	Target     string    `json:"target"`
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"createdAt"`
	Deadline   time.Time `json:"deadline"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Hosts counts the nodes the run sent host checks to.
	Hosts int `json:"hosts"`
	// Verdict and Failed are the report's, once the run is done.
	Verdict string   `json:"verdict,omitempty"`
	Failed  []string `json:"failed,omitempty"`
}

// TimeRange is the half-open interval [Start, End).
type TimeRange struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// MaintenanceCalendar is a cluster's maintenance policy laid out over a
// range of time (GET /v1/clusters/{name}/maintenance-policy/calendar).
type MaintenanceCalendar struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Window are the window's open stretches inside [From, To), clipped
	// to it; the whole range when the policy has no window (always open).
	Window []TimeRange `json:"window"`
	// Exclusions are the policy's exclusions that overlap [From, To), as
	// the policy states them (not clipped).
	Exclusions []CalendarExclusion `json:"exclusions"`
}

// CalendarExclusion is one exclusion of a MaintenanceCalendar.
type CalendarExclusion struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Scope is no_upgrades, no_minor_upgrades or no_minor_or_node_upgrades.
	Scope string `json:"scope"`
}
