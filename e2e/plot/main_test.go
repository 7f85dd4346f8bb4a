package main

import (
	"bytes"
	"image/png"
	"testing"
)

func TestDrawRun(t *testing.T) {
	r := Run{Duration: "2m0s", Samples: []Sample{
		{At: 10, RSS: 80 << 20, Heap: 20 << 20, Goroutines: 400, FDs: 60, Sockets: 40, ProxyConns: 12},
		{At: 20, RSS: 82 << 20, Heap: 21 << 20, Goroutines: 410, FDs: 61, Sockets: 41, ProxyConns: 12},
	}}
	var b bytes.Buffer
	if err := drawRun(&b, r, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&b); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if err := drawRun(&b, Run{}, "empty"); err == nil {
		t.Error("a run without samples was drawn")
	}
}
