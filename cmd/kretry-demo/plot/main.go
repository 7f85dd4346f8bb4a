package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

// Timeline is kretry-demo's timeline, as its JSON says.
type Timeline struct {
	Clients []string `json:"clients"`
	Samples []struct {
		T       float64 `json:"t"`
		Clients []Point `json:"clients"`
	} `json:"samples"`
	Faults []struct {
		T      float64 `json:"t"`
		Client int     `json:"client"`
		Kind   string  `json:"kind"`
	} `json:"faults"`
	Spans []struct {
		From  float64 `json:"from"`
		To    float64 `json:"to"`
		Label string  `json:"label"`
	} `json:"spans"`
	Notes []struct {
		T      float64 `json:"t"`
		Client int     `json:"client"`
		Text   string  `json:"text"`
	} `json:"notes"`
	Stop float64 `json:"stop"`
	End  float64 `json:"end"`
}

// Point is one client at one moment; Lag is -1 where unknown.
type Point struct {
	Requests int64 `json:"requests"`
	Fetches  int64 `json:"fetches"`
	Lag      int64 `json:"lag"`
}

func main() {
	in := flag.String("in", "", "the timeline JSON kretry-demo wrote")
	out := flag.String("out", "demo.png", "the PNG to write")
	title := flag.String("title", "kretry-demo", "the figure's title")
	flag.Parse()
	if err := run(*in, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in, out, title string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var tl Timeline
	if err := json.Unmarshal(data, &tl); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := Draw(&tl, title, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
