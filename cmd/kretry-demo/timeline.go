package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kretry/kretry/internal/report"
)

// timeline is what --plot draws: per client, requests, initial-state fetches and lag
// over time, and the faults. Its JSON form is what the plotter module reads
// (cmd/kretry-demo/plot); times are seconds since the writer and the faults began.
type timeline struct {
	mu    sync.Mutex
	start time.Time // zero until begin

	Clients []string        `json:"clients"`
	Samples []timelinePoint `json:"samples"`
	Faults  []timelineFault `json:"faults"`
	Spans   []timelineSpan  `json:"spans"`
	Notes   []timelineNote  `json:"notes"`
	Stop    float64         `json:"stop"` // when the writer and the faults stopped
	End     float64         `json:"end"`  // when the clients had settled
}

type timelinePoint struct {
	T       float64       `json:"t"`
	Clients []clientPoint `json:"clients"` // in Clients order
}

// clientPoint is one client at one moment; Lag is -1 where unknown (a raw watch that
// ended, a real cluster).
type clientPoint struct {
	Requests int64 `json:"requests"`
	Fetches  int64 `json:"fetches"`
	Lag      int64 `json:"lag"`
}

type timelineFault struct {
	T      float64 `json:"t"`
	Client int     `json:"client"` // index in Clients
	Kind   string  `json:"kind"`
}

// timelineNote is a remark on one client at one moment, such as a raw watch that ended.
type timelineNote struct {
	T      float64 `json:"t"`
	Client int     `json:"client"`
	Text   string  `json:"text"`
}

type timelineSpan struct {
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Label string  `json:"label"`
}

func newTimeline(clients []string) *timeline { return &timeline{Clients: clients} }

func (tl *timeline) begin(at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.start = at
}

func (tl *timeline) seconds(at time.Time) float64 { return at.Sub(tl.start).Seconds() }

func (tl *timeline) sample(at time.Time, clients []clientPoint) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.start.IsZero() {
		tl.Samples = append(tl.Samples, timelinePoint{T: tl.seconds(at), Clients: clients})
	}
}

func (tl *timeline) fault(at time.Time, client, kind string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if i := slices.Index(tl.Clients, client); i >= 0 {
		tl.Faults = append(tl.Faults, timelineFault{T: tl.seconds(at), Client: i, Kind: kind})
	}
}

func (tl *timeline) note(at time.Time, client, text string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if i := slices.Index(tl.Clients, client); i >= 0 {
		tl.Notes = append(tl.Notes, timelineNote{T: tl.seconds(at), Client: i, Text: text})
	}
}

func (tl *timeline) stop(at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.Stop = tl.seconds(at)
}

func (tl *timeline) span(from, to time.Time, label string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.Spans = append(tl.Spans, timelineSpan{From: tl.seconds(from), To: tl.seconds(to), Label: label})
}

func (tl *timeline) end(at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.End = tl.seconds(at)
}

func (tl *timeline) writeJSON(w io.Writer) error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return json.NewEncoder(w).Encode(tl)
}

// plot draws the timeline as a PNG at path with the plotter module beside
// this command's source (report.Plot): --plot needs the go tool and a
// kretry checkout, as `go run ./cmd/kretry-demo` has.
func plot(ctx context.Context, tl *timeline, path string, title string, stderr io.Writer) error {
	_, source, _, _ := runtime.Caller(0)
	dir, err := report.PlotModule(source)
	if err != nil {
		return err
	}
	data, err := os.CreateTemp("", "kretry-demo-timeline-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(data.Name())
	err = tl.writeJSON(data)
	if closeErr := data.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return report.Plot(ctx, dir, data.Name(), path, title, stderr)
}
