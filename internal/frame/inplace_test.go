package frame

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"testing"
)

// lentSummary is scanSummary for a caller that lends its own Read slices of
// random sizes (Lend, Next until ErrNeedMore, Return), falling back to
// buffered Next when a slice holds no whole frame, over a reader that
// delivers the stream cut at random points. It checks on the way that every
// lent frame's Raw lies in the caller's slice right after the frames before
// it, and that Return counts exactly those bytes.
func lentSummary(t *testing.T, stream []byte, enc Encoding, rng *rand.Rand) string {
	t.Helper()
	sc := NewScanner(&randomReads{data: stream, rng: rng}, enc, 0)
	var frames []Frame
	var raw []byte
	record := func(fr Frame) {
		fr.Raw = nil
		fr.Event.ResourceVersion = bytes.Clone(fr.Event.ResourceVersion)
		frames = append(frames, fr)
	}
	var err error
	for err == nil {
		p := make([]byte, 1+rng.IntN(2*len(stream)+16))
		if sc.Lend(p) {
			delivered := 0
			for {
				fr, nextErr := sc.Next()
				if errors.Is(nextErr, ErrNeedMore) {
					break
				}
				if nextErr != nil {
					err = nextErr
					break
				}
				if len(fr.Raw) == 0 || &fr.Raw[0] != &p[delivered] {
					t.Fatalf("a lent frame's Raw is not in the caller's slice at %d", delivered)
				}
				delivered += len(fr.Raw)
				record(fr)
			}
			if n := sc.Return(); n != delivered {
				t.Fatalf("Return = %d; the frames span %d", n, delivered)
			}
			raw = append(raw, p[:delivered]...)
			if err != nil || delivered > 0 {
				continue
			}
		}
		var fr Frame
		if fr, err = sc.Next(); err == nil {
			raw = append(raw, fr.Raw...)
			record(fr)
		}
	}
	var invalid *InvalidFrameError
	if errors.As(err, &invalid) {
		err = fmt.Errorf("invalid at %d: %w", invalid.Offset, invalid.Err)
	}
	return fmt.Sprintf("%+v\nraw+trailing %q\nerr %v", frames, append(raw, sc.Trailing()...), err)
}

// randomReads returns data in reads of random sizes.
type randomReads struct {
	data []byte
	rng  *rand.Rand
}

func (r *randomReads) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+r.rng.IntN(len(r.data)))], r.data)
	r.data = r.data[n:]
	return n, nil
}

// checkInPlace runs lentSummary with a few random sources drawn from the
// stream itself (so that the committed corpus keeps its one-argument form)
// and compares each with the buffered scan of the whole stream.
func checkInPlace(t *testing.T, stream []byte, enc Encoding, whole string) {
	h := fnv.New64a()
	h.Write(stream)
	seed := h.Sum64()
	for i := range uint64(4) {
		if got := lentSummary(t, stream, enc, rand.New(rand.NewPCG(seed, i))); got != whole {
			t.Fatalf("scanned in lent slices (source %d), the result differs:\n%s\nvs\n%s", i, got, whole)
		}
	}
}

// TestLendKeepsOnlyTheTornTail: a slice that holds one and a half frames
// gets the whole one; the half is what the Scanner keeps, and the next
// slice gets it back in front.
func TestLendKeepsOnlyTheTornTail(t *testing.T) {
	for _, enc := range []Encoding{JSON, Protobuf, CBOR} {
		t.Run(enc.String(), func(t *testing.T) {
			one := encodeEvents(t, enc, watchEvent{"ADDED", configMap("a", "101", 100)})
			two := encodeEvents(t, enc, watchEvent{"MODIFIED", configMap("a", "102", 100)})
			sc := NewScanner(bytes.NewReader(append(append([]byte(nil), one...), two...)), enc, 0)
			p := make([]byte, len(one)+len(two)/2)
			if !sc.Lend(p) {
				t.Fatal("Lend refused")
			}
			fr, err := sc.Next()
			if err != nil || len(fr.Raw) != len(one) || &fr.Raw[0] != &p[0] {
				t.Fatalf("first frame: %d bytes, %v", len(fr.Raw), err)
			}
			if _, err := sc.Next(); !errors.Is(err, ErrNeedMore) {
				t.Fatalf("second Next: %v; want ErrNeedMore", err)
			}
			if n := sc.Return(); n != len(one) {
				t.Fatalf("Return = %d; want %d", n, len(one))
			}
			if held := sc.Held(); held != len(two)/2 {
				t.Fatalf("held %d bytes; want the torn half, %d", held, len(two)/2)
			}
			q := make([]byte, 2*len(two))
			if !sc.Lend(q) {
				t.Fatal("second Lend refused")
			}
			fr, err = sc.Next()
			if err != nil || !bytes.Equal(fr.Raw, two) || &fr.Raw[0] != &q[0] {
				t.Fatalf("second frame: %q, %v", fr.Raw, err)
			}
			if fr.Event.Type != Modified || string(fr.Event.ResourceVersion) != "102" {
				t.Fatalf("second frame: %+v", fr.Event)
			}
			sc.Return()
		})
	}
}
