package gcefake

import (
	"encoding/json"

	compute "google.golang.org/api/compute/v1"
)

// AddTemplate makes an instance template exist, as a base template for
// the adapter's EnsureTemplate.
func (s *Server) AddTemplate(name string, props *compute.InstanceProperties) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A deep copy, so the caller's value and the server's do not alias.
	b, _ := json.Marshal(props)
	var p compute.InstanceProperties
	_ = json.Unmarshal(b, &p)
	s.templates[name] = &compute.InstanceTemplate{
		Kind: "compute#instanceTemplate", Name: name, Id: s.nextID(),
		SelfLink: s.link("global/instanceTemplates/" + name), Properties: &p,
	}
}

// Template returns a copy of a template, nil if it does not exist.
func (s *Server) Template(name string) *compute.InstanceTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[name]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(t)
	var out compute.InstanceTemplate
	_ = json.Unmarshal(b, &out)
	return &out
}

// DefaultInstanceQuota is a region's INSTANCES quota until SetQuota
// changes it.
const DefaultInstanceQuota = 1000

// SetQuota sets the INSTANCES quota of a region (instances that hold a
// VM, in all its zones); 0 restores DefaultInstanceQuota. New instances
// beyond it stay CREATING with a QUOTA_EXCEEDED lastAttempt error until
// quota frees up.
func (s *Server) SetQuota(region string, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit <= 0 {
		delete(s.quota, region)
		return
	}
	s.quota[region] = limit
}

// SetStockout says whether a zone is out of capacity: while it is, new
// and recreated instances there stay CREATING (RECREATING) with a
// ZONE_RESOURCE_POOL_EXHAUSTED lastAttempt error.
func (s *Server) SetStockout(zone string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.stockout[zone] = true
		return
	}
	delete(s.stockout, zone)
}

// FailNext makes the next request whose "METHOD path" (path below the
// project, e.g. "POST zones/z/instanceGroupManagers/g/createInstances")
// contains match fail at once with status and reason ("quotaExceeded"
// with 403, "rateLimitExceeded" with 403 or 429, "backendError" with
// 503). Nothing changes and no operation is made, so the requestId is
// not used up.
func (s *Server) FailNext(match string, status int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{match: match, status: status, reason: reason})
}

// FailNextOperation makes the operation of the next change whose
// "METHOD path" contains match end DONE with the error code and message
// (and httpErrorStatusCode status), its change not made. Its requestId
// keeps the failed operation: a repeat gets it again.
func (s *Server) FailNextOperation(match string, status int, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opFaults = append(s.opFaults, opFault{match: match, status: status, code: code, message: message})
}

// HoldNextOperation makes the next operation stay RUNNING, its change
// made, until a request repeats its requestId (or Settle): an operation
// that outlives the adapter's deadline.
func (s *Server) HoldNextOperation() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds++
}

// Settle finishes everything that can finish: held and running
// operations are DONE, deleted instances are gone, and instances being
// created or recreated run unless stockout or quota keeps them waiting.
func (s *Server) Settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range s.ops {
		op.held = false
		for op.op.Status != "DONE" {
			s.advance(op)
		}
	}
	for _, g := range s.sortedGroups() {
		for _, in := range g.sorted() {
			if in.action == "DELETING" {
				delete(g.instances, in.name)
			}
		}
	}
	for _, g := range s.sortedGroups() {
		for _, in := range g.sorted() {
			if (in.action == "CREATING" || in.action == "RECREATING") && s.place(g.zone, in) {
				in.action, in.status, in.polls = "NONE", "RUNNING", s.cfg.InstancePolls
			}
		}
	}
}

// Log returns the request log, one line per request; a request whose
// line equals the one before it (a poll of an operation that has not
// moved) is not repeated.
func (s *Server) Log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// ResetLog empties the request log.
func (s *Server) ResetLog() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}
