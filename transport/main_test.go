package transport_test

import (
	"flag"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// outsideParallel is how many parallel tests run at once unless -parallel
// is given. The outside-in tests (outside_*_test.go) spend their time
// waiting in real seconds on loopback servers, not on a CPU, so the
// default of GOMAXPROCS would run ~560 s of waiting two at a time.
const outsideParallel = 32

// TestMain fails the package's tests if any goroutine they started (a
// resuming stream's, a retry wait's, an HTTP connection's) outlives them.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); !set && p != nil && p.Value.(flag.Getter).Get().(int) < outsideParallel {
		if err := flag.Set("test.parallel", strconv.Itoa(outsideParallel)); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
