//go:build gatebypass

package coordinator

// The gatebypass build of the coordinator (go build -tags gatebypass)
// writes what some member cannot read, on purpose: the capability gate
// (gate.go) lets everything through. It exists for the test of a member
// given an entry it cannot read (package mixed) and is never released.
func init() { gateBypassed = true }
