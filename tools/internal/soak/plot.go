package soak

import (
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one line of a panel: its name and its value in a window (NaN: not measured).
type series struct {
	name  string
	value func(Window) float64
}

// plotWindows draws the windows as four panels, one above the other, over the run's minutes:
// the streams' sizes, the tables' rows, the processes' memory, and commit→posted latency (on a
// log scale).
func plotWindows(path string, ws []Window) error {
	panels := []struct {
		title, unit string
		lines       []series
		log         bool
	}{
		{"streams", "MiB", []series{
			{"wallet stream", func(w Window) float64 { return streamMiB(w, "wallet") }},
			{"gl stream", func(w Window) float64 { return streamMiB(w, "gl") }},
		}, false},
		{"tables", "rows", rowSeries(), false},
		{"memory", "RSS MiB", []series{
			{"wallet", func(w Window) float64 { return w.RSS["wallet"] }},
			{"gl", func(w Window) float64 { return w.RSS["gl"] }},
			{"nats", func(w Window) float64 { return w.RSS["nats"] }},
		}, false},
		{"commit→posted", "ms", []series{
			{"p50", func(w Window) float64 { return w.P50 }},
			{"p99", func(w Window) float64 { return w.P99 }},
		}, true},
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = "soak: " + pn.title + " per window"
		p.X.Label.Text = "minutes since the load started"
		p.Y.Label.Text = pn.unit
		for j, s := range pn.lines {
			var xys plotter.XYs
			for _, w := range ws {
				if v := s.value(w); !math.IsNaN(v) {
					xys = append(xys, plotter.XY{X: w.Seconds / 60, Y: v})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = colors[j%len(colors)], colors[j%len(colors)]
			p.Add(line, points)
			p.Legend.Add(s.name, line)
		}
		if pn.log {
			// An outage's window has a p99 a hundred times the others': on a log scale both show.
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(10*vg.Inch, 14*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func streamMiB(w Window, name string) float64 {
	s, ok := w.Streams[name]
	if !ok {
		return math.NaN()
	}
	return float64(s.Bytes) / (1 << 20)
}

func rowSeries() []series {
	var out []series
	for _, side := range []struct {
		name   string
		tables []string
	}{{"wallet", walletTables}, {"gl", glTables}} {
		for _, t := range side.tables {
			key := side.name + " " + t
			out = append(out, series{key, func(w Window) float64 {
				n, ok := w.Rows[key]
				if !ok {
					return math.NaN()
				}
				return float64(n)
			}})
		}
	}
	return out
}

var colors = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 148, G: 103, B: 189, A: 255},
	color.RGBA{R: 255, G: 127, B: 14, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
	color.RGBA{R: 227, G: 119, B: 194, A: 255},
}
