package main

import (
	"bytes"
	"image/png"
	"testing"
)

func TestDrawFleetHA(t *testing.T) {
	f := HAFile{Agents: 10, Runs: []HARun{
		{Pace: "fast", Client: "stock", Run: 1, Restarts: []float64{5, 15}, Series: []HAPoint{{At: 1, Requests: 10, APICPU: 0.5}, {At: 20, Requests: 30, APICPU: 1.2}}},
		{Pace: "fast", Client: "kretry", Run: 1, Restarts: []float64{4, 14}, Series: []HAPoint{{At: 1, Requests: 12, APICPU: 0.4}, {At: 20, Requests: 20, APICPU: 0.9}}},
		{Pace: "cloud", Client: "stock", Run: 1, Restarts: []float64{5}, Series: []HAPoint{{At: 1, Requests: 10, APICPU: 0.5}, {At: 9, Requests: 9, APICPU: 0.3}}},
	}}
	var b bytes.Buffer
	if err := drawFleetHA(&b, f, "test"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w <= h {
		t.Errorf("two paces side by side should be wider than high, got %dx%d", w, h)
	}
	// The same paces behind three apiservers as well: four columns, twice as wide.
	two := img.Bounds().Dx()
	for _, r := range f.Runs {
		r.APIServers = 3
		f.Runs = append(f.Runs, r)
	}
	b.Reset()
	if err := drawFleetHA(&b, f, "test"); err != nil {
		t.Fatal(err)
	}
	if img, err = png.Decode(&b); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if w := img.Bounds().Dx(); w != 2*two {
		t.Errorf("two and three apiservers: width %d, want %d", w, 2*two)
	}
	if err := drawFleetHA(&b, HAFile{}, "empty"); err == nil {
		t.Error("a file without runs was drawn")
	}
}
