package main

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Size of the figure.
const (
	width  = 11 * vg.Inch
	height = 12 * vg.Inch
	dpi    = 110
)

var (
	stockColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}  // red
	kretryColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}  // blue
	spanColor   = color.NRGBA{R: 0xff, G: 0xa5, B: 0x00, A: 0x38} // translucent orange
	stopColor   = color.Gray{Y: 0x80}
)

// clientStyle: stock red, kretry blue; informers solid, raw watchers dashed.
func clientStyle(name string) draw.LineStyle {
	style := draw.LineStyle{Color: stockColor, Width: vg.Points(2)}
	if strings.Contains(name, "kretry") {
		style.Color = kretryColor
	}
	if strings.Contains(name, "raw") {
		style.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return style
}

// faultGlyphs gives each fault kind a shape and colour; unknown kinds get a grey dot.
var faultGlyphs = map[string]draw.GlyphStyle{
	"connection cut":   {Shape: draw.CrossGlyph{}, Color: color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}},
	"early close":      {Shape: draw.RingGlyph{}, Color: color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	"ERROR 500 event":  {Shape: draw.TriangleGlyph{}, Color: color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	"429 burst":        {Shape: draw.SquareGlyph{}, Color: color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}},
	"rollout (503s)":   {Shape: draw.PyramidGlyph{}, Color: color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
	"compaction (410)": {Shape: draw.CircleGlyph{}, Color: color.Black},
}

// Draw renders the timeline as a PNG: the faults strip, then fetches, requests and lag.
func Draw(tl *Timeline, title string, w io.Writer) error {
	if len(tl.Clients) == 0 || len(tl.Samples) == 0 {
		return fmt.Errorf("an empty timeline: %d clients, %d samples", len(tl.Clients), len(tl.Samples))
	}
	panels := []*plot.Plot{faultStrip(tl, title)}
	for _, m := range []struct {
		label string
		value func(Point) float64
		step  bool
	}{
		{"initial-state fetches\n(LIST or watch-list, cumulative)", func(p Point) float64 { return float64(p.Fetches) }, true},
		{"requests on the wire\n(cumulative)", func(p Point) float64 { return float64(p.Requests) }, true},
		{"changes behind the server\n(lag)", func(p Point) float64 { return float64(p.Lag) }, false},
	} {
		p, err := metric(tl, m.label, m.value, m.step)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	panels[len(panels)-1].X.Label.Text = "seconds since the faults began (the dotted line: writer and faults stop)"
	// One legend for the clients, in the fetches panel, where the lines stay low.
	for _, p := range panels[2:] {
		p.Legend = plot.NewLegend()
	}
	panels[1].Legend.Top, panels[1].Legend.Left = true, true
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, tl.End
	}

	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(10)}
	for i, row := range plot.Align(rows, tiles, dc) {
		panels[i].Draw(row[0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// faultStrip is one row per client, a glyph per fault by kind, the rollout shaded.
func faultStrip(tl *Timeline, title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "faults into\neach client"
	n := len(tl.Clients)
	row := func(client int) float64 { return float64(n - 1 - client) } // first client on top
	var ticks []plot.Tick
	for i, name := range tl.Clients {
		ticks = append(ticks, plot.Tick{Value: row(i), Label: name})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.7, float64(n)-0.3
	addSpans(p, tl, -0.7, float64(n)-0.3, true)

	var kinds []string
	byKind := map[string]plotter.XYs{}
	for _, f := range tl.Faults {
		if _, ok := byKind[f.Kind]; !ok {
			kinds = append(kinds, f.Kind)
		}
		byKind[f.Kind] = append(byKind[f.Kind], plotter.XY{X: f.T, Y: row(f.Client)})
	}
	slices.Sort(kinds)
	for _, kind := range kinds {
		scatter, err := plotter.NewScatter(byKind[kind])
		if err != nil {
			continue
		}
		style, ok := faultGlyphs[kind]
		if !ok {
			style = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Color: color.Gray{Y: 0x80}}
		}
		style.Radius = vg.Points(4)
		scatter.GlyphStyle = style
		p.Add(scatter)
		p.Legend.Add(kind, scatter)
	}
	// Notes (a raw watch that ended) go on their client's row, after the moment.
	var notes plotter.XYLabels
	for _, note := range tl.Notes {
		notes.XYs = append(notes.XYs, plotter.XY{X: note.T, Y: row(note.Client)})
		notes.Labels = append(notes.Labels, "   "+note.Text)
	}
	if len(notes.XYs) > 0 {
		if labels, err := plotter.NewLabels(notes); err == nil {
			for i := range labels.TextStyle {
				labels.TextStyle[i].YAlign = draw.YCenter
				labels.TextStyle[i].Color = stockColor
			}
			p.Add(labels)
		}
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.XOffs = vg.Points(-4)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p
}

// metric plots one measure per client over time; a Lag of -1 breaks the line.
func metric(tl *Timeline, label string, value func(Point) float64, step bool) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = label
	p.Add(plotter.NewGrid())
	top := 1.0
	for _, s := range tl.Samples {
		for _, c := range s.Clients {
			top = max(top, value(c))
		}
	}
	p.Y.Min, p.Y.Max = 0, top*1.1
	addSpans(p, tl, 0, top*1.1, false)

	for i, name := range tl.Clients {
		var segments []plotter.XYs
		var current plotter.XYs
		for _, s := range tl.Samples {
			if i >= len(s.Clients) || value(s.Clients[i]) < 0 {
				if len(current) > 0 {
					segments, current = append(segments, current), nil
				}
				continue
			}
			current = append(current, plotter.XY{X: s.T, Y: value(s.Clients[i])})
		}
		if len(current) > 0 {
			segments = append(segments, current)
		}
		for j, seg := range segments {
			line, err := plotter.NewLine(seg)
			if err != nil {
				return nil, err
			}
			line.LineStyle = clientStyle(name)
			if step {
				line.StepStyle = plotter.PostStep
			}
			p.Add(line)
			if j == 0 {
				p.Legend.Add(name, line)
			}
		}
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, nil
}

// addSpans shades the timeline's spans (the rollout) between y0 and y1 and draws the
// moment the faults stopped as a dotted line; with labelled set, it names the spans.
func addSpans(p *plot.Plot, tl *Timeline, y0, y1 float64, labelled bool) {
	var labels plotter.XYLabels
	for _, s := range tl.Spans {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: s.From, Y: y0}, {X: s.To, Y: y0}, {X: s.To, Y: y1}, {X: s.From, Y: y1}})
		if err != nil {
			continue
		}
		poly.Color = spanColor
		poly.LineStyle.Width = 0
		p.Add(poly)
		labels.XYs = append(labels.XYs, plotter.XY{X: s.From, Y: y1 - (y1-y0)*0.06})
		labels.Labels = append(labels.Labels, " "+s.Label)
	}
	if labelled && len(labels.XYs) > 0 {
		if l, err := plotter.NewLabels(labels); err == nil {
			p.Add(l)
		}
	}
	if tl.Stop > 0 {
		if stop, err := plotter.NewLine(plotter.XYs{{X: tl.Stop, Y: y0}, {X: tl.Stop, Y: y1}}); err == nil {
			stop.LineStyle = draw.LineStyle{Color: stopColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
			p.Add(stop)
		}
	}
}
