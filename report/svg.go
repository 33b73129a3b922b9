package report

import (
	"fmt"
	"strconv"
	"strings"

	"harness/schemas"
)

// chart is an SVG line chart of one metric against k: per run a line
// through one point per k and a band for the interval.
type chart struct {
	Title, Metric, Caption string
	W, H                   int
	Left, Right            float64
	Top, Bottom            float64
	GridY                  []tick
	TicksX                 []tick
	Series                 []series
	Empty                  bool
}

type tick struct {
	Pos   float64
	Label string
}

type series struct {
	Label, Class string
	Line, Band   string
	Points       []point
}

type point struct {
	K    int
	X, Y float64
	Tip  string
}

// Chart geometry, in SVG user units.
const (
	chartW      = 440
	chartH      = 250
	chartLeft   = 44
	chartRight  = 14
	chartTop    = 14
	chartBottom = 38
)

// buildChart lays out one chart; series[i] is the curve of run i
// (labels[i]), one estimate per k starting at k = 1.
func buildChart(title, metric, caption string, labels []string, curves [][]schemas.Estimate) chart {
	c := chart{Title: title, Metric: metric, Caption: caption, W: chartW, H: chartH,
		Left: chartLeft, Right: chartW - chartRight, Top: chartTop, Bottom: chartH - chartBottom}
	maxK := 0
	for _, cv := range curves {
		maxK = max(maxK, len(cv))
	}
	if maxK == 0 {
		c.Empty = true
		return c
	}
	x := func(k int) float64 {
		if maxK == 1 {
			return (c.Left + c.Right) / 2
		}
		return c.Left + float64(k-1)/float64(maxK-1)*(c.Right-c.Left)
	}
	y := func(v float64) float64 { return c.Top + (1-clamp(v))*(c.Bottom-c.Top) }
	for _, v := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.GridY = append(c.GridY, tick{Pos: y(v), Label: strconv.Itoa(int(v*100)) + "%"})
	}
	step := 1
	for maxK/step > 12 {
		switch {
		case step == 1:
			step = 2
		case step == 2:
			step = 5
		default:
			step *= 2
		}
	}
	for k := 1; k <= maxK; k++ {
		if k == 1 || k == maxK || k%step == 0 {
			if k != maxK && k != 1 && maxK-k < step/2 {
				continue
			}
			c.TicksX = append(c.TicksX, tick{Pos: x(k), Label: strconv.Itoa(k)})
		}
	}
	for i, cv := range curves {
		s := series{Label: labels[i], Class: fmt.Sprintf("s%d", i)}
		var line, upper, lower []string
		for _, e := range cv {
			px, py := x(e.K), y(e.Mean)
			line = append(line, xy(px, py))
			upper = append(upper, xy(px, y(e.High)))
			lower = append(lower, xy(px, y(e.Low)))
			s.Points = append(s.Points, point{K: e.K, X: px, Y: py, Tip: fmt.Sprintf(
				"%s %s, k=%d: %s [%s, %s] over %d cases", labels[i], title, e.K, pct(e.Mean), pct(e.Low), pct(e.High), e.Cases)})
		}
		for j := len(lower) - 1; j >= 0; j-- {
			upper = append(upper, lower[j])
		}
		s.Line = strings.Join(line, " ")
		if len(cv) == 1 {
			// A single k: draw the interval as a short vertical bar.
			px := x(cv[0].K)
			s.Band = strings.Join([]string{xy(px-4, y(cv[0].High)), xy(px+4, y(cv[0].High)),
				xy(px+4, y(cv[0].Low)), xy(px-4, y(cv[0].Low))}, " ")
		} else {
			s.Band = strings.Join(upper, " ")
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func xy(x, y float64) string {
	return strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64)
}

func clamp(v float64) float64 {
	return min(1, max(0, v))
}
