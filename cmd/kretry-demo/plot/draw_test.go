package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/vg"
)

// timelineJSON is a small timeline as kretry-demo writes it.
const timelineJSON = `{"clients":["stock informer","kretry informer"],
"samples":[{"t":0.1,"clients":[{"requests":1,"fetches":1,"lag":0},{"requests":1,"fetches":1,"lag":0}]},
{"t":1,"clients":[{"requests":3,"fetches":2,"lag":20},{"requests":2,"fetches":1,"lag":-1}]},
{"t":2,"clients":[{"requests":4,"fetches":2,"lag":0},{"requests":3,"fetches":1,"lag":0}]}],
"faults":[{"t":0.5,"client":0,"kind":"ERROR 500 event"},{"t":0.5,"client":1,"kind":"ERROR 500 event"},{"t":1.2,"client":1,"kind":"something new"}],
"spans":[{"from":0.8,"to":1.4,"label":"rollout: 1s of 503s"}],
"notes":[{"t":1.5,"client":0,"text":"channel closed"}],
"stop":1.8,"end":2.2}`

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "timeline.json"), filepath.Join(dir, "demo.png")
	if err := os.WriteFile(in, []byte(timelineJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out, "test"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.Bounds().Dx(), int(float64(width/vg.Inch)*dpi); got != want {
		t.Errorf("width %d px, want %d", got, want)
	}
}

func TestDrawRefusesAnEmptyTimeline(t *testing.T) {
	if err := Draw(&Timeline{}, "empty", &bytes.Buffer{}); err == nil {
		t.Fatal("drew an empty timeline")
	}
	if err := run(filepath.Join(t.TempDir(), "missing.json"), filepath.Join(t.TempDir(), "x.png"), ""); err == nil {
		t.Fatal("no error for a missing input")
	}
}

// Draw renders a timeline as a PNG; kretry-demo --plot feeds it the run's timeline.
func ExampleDraw() {
	var tl Timeline
	if err := json.Unmarshal([]byte(timelineJSON), &tl); err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := Draw(&tl, "kretry-demo", &buf); err != nil {
		panic(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println(img.Bounds().Dx(), "x", img.Bounds().Dy(), "pixels")
	// Output:
	// 1210 x 1320 pixels
}
