// Package gcefake is a stateful fake of the part of the Compute Engine API
// that molt's gce adapter uses, served over HTTP (httptest) so the real Go
// client talks to it: instance templates, zonal managed instance groups
// and their instances, zonal autoscalers, region quotas, and the zone and
// global operations every change returns.
//
// It behaves as the real API does where the adapter depends on it:
//   - an operation is PENDING, then RUNNING, then DONE over successive
//     polls (operations.wait or get); its change is made when the request
//     arrives;
//   - a repeated requestId returns the operation the first request started
//     and changes nothing, also when that operation failed;
//   - a new instance is CREATING, then PROVISIONING, then RUNNING over
//     successive listManagedInstances calls of its group; while its zone
//     is out of capacity (SetStockout) or its region's INSTANCES quota is
//     used up (SetQuota) it stays CREATING with a lastAttempt error
//     (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED);
//   - deleteInstances with skipInstancesOnValidationError skips names the
//     group does not have; a group an autoscaler targets cannot be
//     deleted.
//
// Faults are injected with FailNext (a synchronous HTTP error: 403
// quotaExceeded, 429, 503, …), FailNextOperation (an operation that ends
// DONE with an error, its change not made) and HoldNextOperation (an
// operation that stays RUNNING, its change made, until its requestId is
// repeated).
//
// Every request is recorded in a log (Log) of one deterministic line per
// request: method, path below the project, the body's key fields, the
// requestId's first eight characters, and the outcome. Nothing in the
// fake is random or reads the clock.
package gcefake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"

	compute "google.golang.org/api/compute/v1"
)

// Config configures a Server.
type Config struct {
	// Project is the only project the server knows; default "molt-test".
	Project string
	// OperationPolls is how many polls an operation takes to be DONE:
	// the first makes it RUNNING, the OperationPolls-th DONE. Default 2
	// (PENDING → RUNNING → DONE).
	OperationPolls int
	// InstancePolls is how many listManagedInstances calls of its group
	// a new instance that nothing blocks takes to run: the calls before
	// report it CREATING. Default 2.
	InstancePolls int
}

// Server is the fake; New starts one, Close stops it. Safe for concurrent
// use.
type Server struct {
	cfg  Config
	http *httptest.Server

	mu          sync.Mutex
	templates   map[string]*compute.InstanceTemplate
	groups      map[string]*group // "zone/name"
	autoscalers map[string]*autoscaler
	ops         map[string]*operation
	requests    map[string]*operation // requestId → its operation
	quota       map[string]int        // region → INSTANCES limit
	stockout    map[string]bool       // zone → no capacity
	faults      []fault
	opFaults    []opFault
	holds       int
	seq         int
	log         []string
}

type group struct {
	zone, name   string
	base         string
	template     string
	updatePolicy string
	onFailure    string
	instances    map[string]*instance
	seq          int
}

type instance struct {
	name     string
	id       uint64
	template string
	action   string // CREATING, RECREATING, DELETING, NONE
	status   string // "", PROVISIONING, RUNNING
	polls    int
	holds    bool // holds quota and capacity (its VM exists)
	errCode  string
	errMsg   string
}

type autoscaler struct {
	zone, name, target string // target: the group's name
	mode               string
	min, max           int64
	description        string
}

type operation struct {
	op    compute.Operation
	polls int
	held  bool
	// errCode, errMsg, errStatus: the error the operation ends with.
	errCode, errMsg string
	errStatus       int
}

type fault struct {
	match  string
	status int
	reason string
}

type opFault struct {
	match, code, message string
	status               int
}

// New starts a server.
func New(cfg Config) *Server {
	if cfg.Project == "" {
		cfg.Project = "molt-test"
	}
	if cfg.OperationPolls <= 0 {
		cfg.OperationPolls = 2
	}
	if cfg.InstancePolls <= 0 {
		cfg.InstancePolls = 2
	}
	s := &Server{
		cfg:         cfg,
		templates:   map[string]*compute.InstanceTemplate{},
		groups:      map[string]*group{},
		autoscalers: map[string]*autoscaler{},
		ops:         map[string]*operation{},
		requests:    map[string]*operation{},
		quota:       map[string]int{},
		stockout:    map[string]bool{},
	}
	s.http = httptest.NewServer(s)
	return s
}

// URL is the server's base URL, for gce.Config.Endpoint.
func (s *Server) URL() string { return s.http.URL }

// Project is the project the server serves.
func (s *Server) Project() string { return s.cfg.Project }

// Close stops the server.
func (s *Server) Close() { s.http.Close() }

const apiBase = "https://www.googleapis.com/compute/v1/"

func (s *Server) link(path string) string { return apiBase + "projects/" + s.cfg.Project + "/" + path }

var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// apiError is an error response in the API's format.
type apiError struct {
	status  int
	reason  string
	message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.reason) }

func notFound(what string) *apiError {
	return &apiError{http.StatusNotFound, "notFound", fmt.Sprintf("The resource '%s' was not found", what)}
}

func invalid(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "invalid", fmt.Sprintf(format, args...)}
}

// call is one request being served.
type call struct {
	method    string
	path      string // below projects/<project>/
	parts     []string
	query     map[string][]string
	body      []byte
	requestID string
	args      []string // key fields for the log
	note      string   // the outcome for the log, beyond the status
}

func (c *call) arg(format string, a ...any) { c.args = append(c.args, fmt.Sprintf(format, a...)) }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/compute/v1"), "/")
	prefix := "projects/" + s.cfg.Project + "/"
	c := &call{method: r.Method, path: strings.TrimPrefix(path, prefix), query: r.URL.Query(), body: body, requestID: r.URL.Query().Get("requestId")}
	c.parts = strings.Split(c.path, "/")

	s.mu.Lock()
	status, resp := s.serve(c, strings.HasPrefix(path, prefix))
	s.record(c, status)
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Server) serve(c *call, inProject bool) (int, any) {
	if !inProject {
		return errorBody(c, notFound("projects/"+strings.Split(c.path, "/")[1]))
	}
	h, kind := s.route(c)
	// fields runs a change's handler for the log's fields only: handlers
	// change nothing, the func they return does.
	fields := func() {
		if h != nil && kind == change {
			_, _ = h(c)
		}
	}
	for i, f := range s.faults {
		if strings.Contains(c.method+" "+c.path, f.match) {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			fields()
			c.note = "(injected)"
			return errorBody(c, &apiError{f.status, f.reason, "injected fault: " + f.reason})
		}
	}
	if c.requestID != "" {
		if op, ok := s.requests[c.requestID]; ok {
			fields()
			if op.held {
				op.held = false
				s.advance(op)
			}
			c.note = "(repeat of " + op.op.Name + ")"
			return http.StatusOK, s.opJSON(op)
		}
	}
	if h == nil {
		return errorBody(c, &apiError{http.StatusNotFound, "notFound", "no such method: " + c.method + " " + c.path})
	}
	if kind == read {
		resp, err := h(c)
		if err != nil {
			return errorBody(c, err)
		}
		return http.StatusOK, resp
	}
	// A change: validated and made now, reported through an operation.
	resp, err := h(c)
	if err != nil {
		return errorBody(c, err)
	}
	apply := resp.(func())
	op := s.newOperation(c)
	if f, ok := s.takeOpFault(c); ok {
		op.errCode, op.errMsg, op.errStatus = f.code, f.message, f.status
	} else {
		apply()
	}
	return http.StatusOK, s.opJSON(op)
}

func errorBody(c *call, e *apiError) (int, any) {
	c.note = strings.TrimSpace(e.reason + " " + c.note)
	return e.status, map[string]any{"error": map[string]any{
		"code":    e.status,
		"message": e.message,
		"errors":  []map[string]string{{"domain": "global", "reason": e.reason, "message": e.message}},
	}}
}

// record appends the request's line to the log, unless it repeats the
// line before it (polls of one operation in one state).
func (s *Server) record(c *call, status int) {
	var b strings.Builder
	b.WriteString(c.method + " " + c.path)
	for _, a := range c.args {
		b.WriteString(" " + a)
	}
	if c.requestID != "" {
		b.WriteString(" req=" + c.requestID[:min(8, len(c.requestID))])
	}
	fmt.Fprintf(&b, " -> %d", status)
	if c.note != "" {
		b.WriteString(" " + c.note)
	}
	line := b.String()
	if n := len(s.log); n > 0 && s.log[n-1] == line {
		return
	}
	s.log = append(s.log, line)
}

type handlerKind int

const (
	read handlerKind = iota
	change
)

// handler serves one method. A read returns the response body; a change
// validates the request and returns the func() that makes it.
type handler func(c *call) (any, *apiError)

func (s *Server) route(c *call) (handler, handlerKind) {
	p := c.parts
	n := len(p)
	switch {
	case n == 2 && p[0] == "regions" && c.method == http.MethodGet:
		return s.getRegion, read
	case n == 3 && p[0] == "global" && p[1] == "instanceTemplates" && c.method == http.MethodGet:
		return s.getTemplate, read
	case n == 2 && p[0] == "global" && p[1] == "instanceTemplates" && c.method == http.MethodPost:
		return s.insertTemplate, change
	case n >= 3 && p[0] == "global" && p[1] == "operations":
		return s.pollOperation, read
	case n >= 4 && p[0] == "zones" && p[2] == "operations":
		return s.pollOperation, read
	case n >= 3 && p[0] == "zones" && p[2] == "instanceGroupManagers":
		return s.routeGroup(c)
	case n >= 3 && p[0] == "zones" && p[2] == "autoscalers":
		return s.routeAutoscaler(c)
	}
	return nil, read
}

func (s *Server) routeGroup(c *call) (handler, handlerKind) {
	p := c.parts
	switch {
	case len(p) == 3 && c.method == http.MethodPost:
		return s.insertGroup, change
	case len(p) == 4 && c.method == http.MethodGet:
		return s.getGroup, read
	case len(p) == 4 && c.method == http.MethodDelete:
		return s.deleteGroup, change
	case len(p) == 4 && c.method == http.MethodPatch:
		return s.patchGroup, change
	case len(p) == 5 && c.method == http.MethodPost:
		switch p[4] {
		case "listManagedInstances":
			return s.listManagedInstances, read
		case "createInstances":
			return s.createInstances, change
		case "deleteInstances":
			return s.deleteInstances, change
		case "recreateInstances":
			return s.recreateInstances, change
		case "resize":
			return s.resize, change
		case "setInstanceTemplate":
			return s.setInstanceTemplate, change
		}
	}
	return nil, read
}

func (s *Server) routeAutoscaler(c *call) (handler, handlerKind) {
	p := c.parts
	switch {
	case len(p) == 3 && c.method == http.MethodPost:
		return s.insertAutoscaler, change
	case len(p) == 3 && c.method == http.MethodPatch:
		return s.patchAutoscaler, change
	case len(p) == 4 && c.method == http.MethodGet:
		return s.getAutoscaler, read
	case len(p) == 4 && c.method == http.MethodDelete:
		return s.deleteAutoscaler, change
	}
	return nil, read
}

func decode(c *call, v any) *apiError {
	if err := json.NewDecoder(bytes.NewReader(c.body)).Decode(v); err != nil {
		return invalid("bad request body: %v", err)
	}
	return nil
}

// regionOf is the region of a zone ("us-central1-a" → "us-central1").
func regionOf(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

func (s *Server) sortedGroups() []*group {
	out := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].zone+"/"+out[i].name < out[j].zone+"/"+out[j].name })
	return out
}

func (g *group) sorted() []*instance {
	out := make([]*instance, 0, len(g.instances))
	for _, in := range g.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// targetSize counts the instances that are not being deleted.
func (g *group) targetSize() int {
	n := 0
	for _, in := range g.instances {
		if in.action != "DELETING" {
			n++
		}
	}
	return n
}

func (s *Server) nextID() uint64 {
	s.seq++
	return uint64(s.seq)
}
