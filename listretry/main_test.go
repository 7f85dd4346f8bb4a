package listretry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started (a
// resuming stream's, a retry wait's, an HTTP connection's) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
