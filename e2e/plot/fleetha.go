package main

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// HAPoint is one second of a TestFleetHA run.
type HAPoint struct {
	At       float64 `json:"at"`
	Requests float64 `json:"requests"`
	APICPU   float64 `json:"api_cpu"`
}

// HARun is one rolling upgrade under one fleet, as TestFleetHA writes it.
type HARun struct {
	// APIServers is how many were behind the balancer; 0 (runs written before it was
	// recorded) means two.
	APIServers int       `json:"apiservers"`
	Pace       string    `json:"pace"`
	Client     string    `json:"client"`
	Run        int       `json:"run"`
	Restarts   []float64 `json:"restarts"`
	Series     []HAPoint `json:"series"`
}

// HAFile is TestFleetHA's JSON.
type HAFile struct {
	Agents  int     `json:"agents"`
	Machine string  `json:"machine"`
	Runs    []HARun `json:"runs"`
}

func runFleetHA(in, out, title string) error { return plotFile(in, out, title, drawFleetHA) }

var clientColor = map[string]color.Color{"stock": orange, "kretry": blue}

// haColumn is one column of the plot: the runs behind one apiserver count at one pace.
type haColumn struct {
	servers int
	pace    string
}

// drawFleetHA draws, per apiserver count and pace (a column), the requests per second through
// the balancer and the apiservers' CPU over the first run's upgrade, stock beside kretry, over
// seconds since the first SIGTERM, with each SIGTERM marked.
func drawFleetHA(w io.Writer, f HAFile, title string) error {
	var columns []haColumn
	first := map[haColumn]map[string]HARun{}
	for _, r := range f.Runs {
		col := haColumn{r.APIServers, r.Pace}
		if col.servers == 0 {
			col.servers = 2
		}
		if first[col] == nil {
			first[col] = map[string]HARun{}
			columns = append(columns, col)
		}
		if _, ok := first[col][r.Client]; !ok && len(r.Series) > 0 && len(r.Restarts) > 0 {
			first[col][r.Client] = r
		}
	}
	if len(columns) == 0 {
		return fmt.Errorf("no runs to draw")
	}
	rowsSpec := []struct {
		ylabel string
		value  func(HAPoint) float64
	}{
		{"requests/s through the balancer", func(p HAPoint) float64 { return p.Requests }},
		{"apiservers' CPU (cores, summed)", func(p HAPoint) float64 { return p.APICPU }},
	}
	rows := make([][]*plot.Plot, len(rowsSpec))
	for ri, rs := range rowsSpec {
		for _, col := range columns {
			p := plot.New()
			if ri == 0 {
				p.Title.Text = fmt.Sprintf("%s: %d apiservers, %s pace, %d agents", title, col.servers, col.pace, f.Agents)
			}
			p.X.Label.Text = "seconds since the first SIGTERM (dashed: each SIGTERM of the stock run)"
			p.Y.Label.Text = rs.ylabel
			p.Y.Min = 0
			p.Legend.Top = true
			for _, client := range []string{"stock", "kretry"} {
				r, ok := first[col][client]
				if !ok {
					continue
				}
				t0 := r.Restarts[0]
				var xys plotter.XYs
				for _, s := range r.Series {
					xys = append(xys, plotter.XY{X: s.At - t0, Y: rs.value(s)})
				}
				if len(xys) == 0 {
					continue
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					return err
				}
				line.Color = clientColor[client]
				line.Width = vg.Points(1.2)
				p.Add(line)
				p.Legend.Add(client, line)
				if client == "stock" {
					for _, at := range r.Restarts {
						p.Add(restartMark{x: at - t0})
					}
				}
			}
			rows[ri] = append(rows[ri], p)
		}
	}
	width, height := vg.Length(len(columns))*6*vg.Inch, 6*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: len(columns), PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(12), PadX: vg.Points(16), PadY: vg.Points(10)}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(canvases[i][j])
		}
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// restartMark is a dashed vertical line across the whole panel at x: one SIGTERM.
type restartMark struct{ x float64 }

// Plot draws the mark.
func (m restartMark) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(m.x)
	c.StrokeLine2(draw.LineStyle{Color: color.Gray{Y: 0x90}, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(3), vg.Points(3)}},
		x, c.Min.Y, x, c.Max.Y)
}
