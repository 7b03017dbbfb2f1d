package coordinator

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests (internal and external) when any
// goroutine outlives them: nothing a leader started may outlive its term
// or Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
