package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Run is one kretry-fleet run, as its JSON says.
type Run struct {
	Scenario string    `json:"scenario"`
	Kind     string    `json:"kind"`
	Clients  int       `json:"clients"`
	FaultAt  float64   `json:"fault_at"`
	FaultEnd float64   `json:"fault_end"`
	RPS      []float64 `json:"rps"` // per 100 ms bin
}

// binSeconds is the width of kretry-fleet's bins.
const binSeconds = 0.1

func main() {
	in := flag.String("in", "", "the JSON kretry-fleet -json wrote")
	out := flag.String("out", "fleet.png", "the PNG to write")
	title := flag.String("title", "kretry-fleet", "the figure's title")
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
	var runs []Run
	if err := json.Unmarshal(data, &runs); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := draw1(f, runs, title); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var colors = map[string]color.Color{
	"client-go":     color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"kretry":        color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"kretry-budget": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// draw1 writes one panel per scenario that has runs, restart and lbdrop
// first.
func draw1(w *os.File, runs []Run, title string) error {
	var panels []*plot.Plot
	for _, scenario := range []string{"restart", "lbdrop", "overload"} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s", title, scenario)
		p.X.Label.Text = "seconds from the fault"
		p.Y.Label.Text = "requests/s at the server (100 ms bins)"
		p.Legend.Top = true
		n := 0
		for _, r := range runs {
			if r.Scenario != scenario {
				continue
			}
			var xys plotter.XYs
			for i, rps := range r.RPS {
				xys = append(xys, plotter.XY{X: float64(i)*binSeconds - r.FaultAt, Y: rps})
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			if c, ok := colors[r.Kind]; ok {
				line.Color = c
			}
			line.Width = vg.Points(1)
			p.Add(line)
			p.Legend.Add(r.Kind, line)
			n++
		}
		if n > 0 {
			p.X.Min = -1
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return fmt.Errorf("no runs to draw")
	}
	width, height := 9*vg.Inch, vg.Length(len(panels))*3*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(10)}
	for i, row := range plot.Align(rows, tiles, dc) {
		rows[i][0].Draw(row[0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}
