package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine they started (an informer's, a
// resuming stream's, a connection's) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
