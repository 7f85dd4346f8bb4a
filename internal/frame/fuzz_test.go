package frame

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/iotest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite testdata/fuzz seed corpora from real-shaped events")

func FuzzScanJSON(f *testing.F)     { fuzzScan(f, JSON) }
func FuzzScanProtobuf(f *testing.F) { fuzzScan(f, Protobuf) }
func FuzzScanCBOR(f *testing.F)     { fuzzScan(f, CBOR) }

// fuzzScan checks, for any input, that the Scanner agrees with client-go's
// decoders (compareWithOracle: same frames, same types, RVs and Status
// fields, errors at the same place), that the CBOR and protobuf fast paths
// read what the exact paths read, and that how the input is cut into reads
// does not change anything it returns.
func fuzzScan(f *testing.F, enc Encoding) {
	for _, seed := range seedStreams(f, enc) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		compareWithOracle(t, enc, stream)
		var fast int
		switch enc {
		case CBOR:
			checkFastPath(t, stream, &fast)
		case Protobuf:
			checkProtoFastPaths(t, stream, &fast)
		}
		whole := scanSummary(t, bytes.NewReader(stream), enc)
		for _, r := range []io.Reader{
			iotest.OneByteReader(bytes.NewReader(stream)),
			iotest.HalfReader(bytes.NewReader(stream)),
		} {
			if got := scanSummary(t, r, enc); got != whole {
				t.Fatalf("reads of another size change the result:\n%s\nvs\n%s", got, whole)
			}
		}
	})
}

// scanSummary describes everything a Scanner returns for a stream that
// does not depend on how it arrives.
func scanSummary(t *testing.T, r io.Reader, enc Encoding) string {
	frames, raw, sc, err := scanAll(t, r, enc, 0)
	var invalid *InvalidFrameError
	if errors.As(err, &invalid) {
		err = fmt.Errorf("invalid at %d: %w", invalid.Offset, invalid.Err)
	}
	// Where Raw ends and Trailing starts depends on reads: separators that
	// arrived with a frame go with it. Together they are the same bytes.
	return fmt.Sprintf("%+v\nraw+trailing %q\nerr %v", frames, append(raw, sc.Trailing()...), err)
}

// seedStreams are real-shaped streams: each kind of event alone, a mixed
// stream, and a few hand-written JSON variants.
func seedStreams(t testing.TB, enc Encoding) [][]byte {
	events := []watchEvent{
		{"ADDED", configMap("a", "101", 60)},
		{"MODIFIED", configMap("a", "102", 0)},
		{"DELETED", configMap("a", "103", 20)},
		{"BOOKMARK", bookmark("104", false)},
		{"BOOKMARK", bookmark("105", true)},
		{"ERROR", status(410, metav1.StatusReasonExpired, 0)},
		{"ERROR", status(429, metav1.StatusReasonTooManyRequests, 3)},
		{"ERROR", status(500, metav1.StatusReasonInternalError, 0)},
	}
	var seeds [][]byte
	for _, ev := range events {
		seeds = append(seeds, encodeEvents(t, enc, ev))
	}
	seeds = append(seeds, encodeEvents(t, enc, events[0], events[4], events[6]))
	if enc == JSON {
		seeds = append(seeds,
			[]byte(`{"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}},"type":"BOOKMARK"}{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"8"}}}`),
			[]byte(`{"\u0074ype":"ADDED","type":"DELETED","object":{"KIND":"ConfigMap","apiVersion":"v1","data":{"k":"\"\\\u00e9\ud83d\ude00"},"metadata":{"resourceVersion":"\u00319","resourceVersion":null}},"object":null}`+"\r\n\t "),
			[]byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":2,"causes":[{"field":"x"}]},"metadata":{}}}`),
		)
		for _, tc := range jsonFrameCases {
			seeds = append(seeds, []byte(tc.stream))
		}
	} else if enc == Protobuf {
		for _, tc := range protobufFrameCases {
			seeds = append(seeds, tc.stream)
		}
	} else {
		for _, tc := range cborFrameCases {
			seeds = append(seeds, tc.stream)
		}
	}
	return seeds
}

// TestWriteSeedCorpus rewrites testdata/fuzz/<Target>/ when run with
// -write-corpus; the committed files are what `go test` replays.
func TestWriteSeedCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus to rewrite the seed corpus")
	}
	for target, enc := range map[string]Encoding{"FuzzScanJSON": JSON, "FuzzScanProtobuf": Protobuf, "FuzzScanCBOR": CBOR} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, seed := range seedStreams(t, enc) {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(seed)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
