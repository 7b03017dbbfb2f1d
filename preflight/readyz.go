package preflight

import (
	"fmt"
	"slices"
	"strings"
)

// statusOK is HTTP 200, written out so that this package does not import
// net/http for one constant (see internal/purity).
const statusOK = 200

// ParseReadyz reads the API server's answer to GET /readyz?verbose: one
// line per readiness check, "[+]name ok" or "[-]name failed: reason", and
// a last line "readyz check passed|failed". status is the HTTP status.
// Ready requires 200 and no failing line, so neither a 200 that lists a
// failure nor a 500 that lists none is taken as healthy.
func ParseReadyz(status int, body string) ControlPlaneHealth {
	var h ControlPlaneHealth
	last := ""
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		last = line
		switch {
		case strings.HasPrefix(line, "[+]"):
			h.Passed = append(h.Passed, checkName(line))
		case strings.HasPrefix(line, "[-]"):
			h.Failing = append(h.Failing, checkName(line))
		}
	}
	slices.Sort(h.Passed)
	slices.Sort(h.Failing)
	if status != statusOK && len(h.Failing) == 0 {
		h.Failing = []string{"readyz"}
	}
	h.Ready = status == statusOK && len(h.Failing) == 0
	h.Message = fmt.Sprintf("/readyz answered %d", status)
	if last != "" {
		h.Message += ": " + last
	}
	return h
}

// checkName takes "name" out of "[+]name ok" or "[-]name failed: reason".
func checkName(line string) string {
	rest := line[3:]
	if i := strings.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
