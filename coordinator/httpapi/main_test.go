package httpapi

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a handler or test server leaves
// a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
