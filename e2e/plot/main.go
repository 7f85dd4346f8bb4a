package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Sample is one sample of the soak, as TestSoak writes it.
type Sample struct {
	At         float64 `json:"at"`
	RSS        float64 `json:"rss"`
	Heap       float64 `json:"heap"`
	Goroutines float64 `json:"goroutines"`
	FDs        float64 `json:"fds"`
	Sockets    float64 `json:"sockets"`
	ProxyConns float64 `json:"proxy_conns"`
}

// Run is the soak's JSON.
type Run struct {
	Duration string   `json:"duration"`
	Samples  []Sample `json:"samples"`
}

func main() {
	in := flag.String("in", "", "the JSON TestSoak wrote")
	out := flag.String("out", "soak.png", "the PNG to write")
	title := flag.String("title", "kretry soak", "the figure's title")
	fleetHA := flag.Bool("fleet-ha", false, "draw TestFleetHA's JSON (requests/s and apiserver CPU over the upgrade) instead")
	flag.Parse()
	draw := run
	if *fleetHA {
		draw = runFleetHA
	}
	if err := draw(*in, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in, out, title string) error { return plotFile(in, out, title, drawRun) }

// plotFile reads the JSON file in into a T, draws it and writes the picture to out.
func plotFile[T any](in, out, title string, draw func(io.Writer, T, string) error) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := draw(f, v, title); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// series is one line of a panel.
type series struct {
	name  string
	value func(Sample) float64
	color color.Color
}

var (
	blue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	green  = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// panels: memory in MiB, goroutines, and descriptors with connections.
var panels = []struct {
	ylabel string
	lines  []series
}{
	{"MiB", []series{
		{"RSS", func(s Sample) float64 { return s.RSS / (1 << 20) }, blue},
		{"live Go heap", func(s Sample) float64 { return s.Heap / (1 << 20) }, orange},
	}},
	{"goroutines", []series{{"goroutines", func(s Sample) float64 { return s.Goroutines }, blue}}},
	{"count", []series{
		{"open fds", func(s Sample) float64 { return s.FDs }, blue},
		{"sockets", func(s Sample) float64 { return s.Sockets }, orange},
		{"connections through the fault proxy", func(s Sample) float64 { return s.ProxyConns }, green},
	}},
}

// drawRun writes one panel per group of series, over minutes since the soak began.
func drawRun(w io.Writer, r Run, title string) error {
	if len(r.Samples) == 0 {
		return fmt.Errorf("no samples to draw")
	}
	var plots []*plot.Plot
	for i, pn := range panels {
		p := plot.New()
		if i == 0 {
			p.Title.Text = title
		}
		p.X.Label.Text = "minutes since the soak began"
		p.Y.Label.Text = pn.ylabel
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		for _, s := range pn.lines {
			var xys plotter.XYs
			for _, smp := range r.Samples {
				xys = append(xys, plotter.XY{X: smp.At / 60, Y: s.value(smp)})
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			line.Color = s.color
			line.Width = vg.Points(1.2)
			p.Add(line)
			p.Legend.Add(s.name, line)
		}
		plots = append(plots, p)
	}
	width, height := 9*vg.Inch, vg.Length(len(plots))*2.6*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(10)}
	for i, row := range plot.Align(rows, tiles, dc) {
		rows[i][0].Draw(row[0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}
