package main

// Panel constructors and the layout: panels flow left to right in a row of
// 24 columns and wrap below the tallest panel of the line.

// prometheus is the dashboard's datasource variable: every panel and query
// uses the data source chosen in it.
var prometheus = &Datasource{Type: "prometheus", UID: "${datasource}"}

// layout assigns ids and grid positions.
type layout struct {
	panels []*Panel
	id     int
	x, y   int
	lineH  int
}

// row starts a new row with a header.
func (l *layout) row(title string) {
	l.newline()
	l.id++
	collapsed := false
	l.panels = append(l.panels, &Panel{Collapsed: &collapsed, Panels: &[]*Panel{}, GridPos: GridPos{H: 1, W: 24, X: 0, Y: l.y},
		ID: l.id, Title: title, Type: "row"})
	l.y++
}

func (l *layout) newline() {
	if l.x > 0 {
		l.y += l.lineH
	}
	l.x, l.lineH = 0, 0
}

// add places p, w columns wide and h high, after the panels before it.
func (l *layout) add(w, h int, p *Panel) {
	if l.x+w > 24 {
		l.newline()
	}
	l.id++
	p.ID = l.id
	p.GridPos = GridPos{H: h, W: w, X: l.x, Y: l.y}
	p.Datasource = prometheus
	for i := range p.Targets {
		p.Targets[i].Datasource = prometheus
		p.Targets[i].RefID = string(rune('A' + i))
	}
	l.x += w
	l.lineH = max(l.lineH, h)
	l.panels = append(l.panels, p)
}

// q is a range query drawn over time, one series per legend.
func q(expr, legend string) Target {
	return Target{EditorMode: "code", Expr: expr, LegendFormat: legend, Range: true}
}

// instant is an instant query shown as a table.
func instant(expr string) Target {
	return Target{EditorMode: "code", Expr: expr, Format: "table", Instant: true, LegendFormat: "__auto"}
}

func f(v float64) *float64 { return &v }

// base is a thresholds list with only the base colour.
func base(color string) Thresholds {
	return Thresholds{Mode: "absolute", Steps: []Step{{Color: color}}}
}

// below colours values under each limit: red under the first, orange
// under the second, green above.
func below(red, orange float64) Thresholds {
	return Thresholds{Mode: "absolute", Steps: []Step{{Color: "red"}, {Color: "orange", Value: f(red)}, {Color: "green", Value: f(orange)}}}
}

// above colours values from a limit up: green below it, red from it.
func above(red float64) Thresholds {
	return Thresholds{Mode: "absolute", Steps: []Step{{Color: "green"}, {Color: "red", Value: f(red)}}}
}

func timeseries(title, desc, unit string, targets ...Target) *Panel {
	return &Panel{
		Title: title, Description: desc, Type: "timeseries", Targets: targets,
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Color: map[string]string{"mode": "palette-classic"},
			Custom: map[string]any{
				"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
				"showPoints": "never", "spanNulls": false,
			},
			Mappings: []any{}, Thresholds: base("green"), Unit: unit,
		}, Overrides: []any{}},
		Options: map[string]any{
			"legend":  map[string]any{"displayMode": "table", "placement": "bottom", "showLegend": true, "calcs": []string{"lastNotNull", "max"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

// withThresholds draws the thresholds of a time series as dashed lines.
func withThresholds(p *Panel, t Thresholds) *Panel {
	p.FieldConfig.Defaults.Thresholds = t
	p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "dashed"}
	return p
}

func stat(title, desc, unit string, t Thresholds, targets ...Target) *Panel {
	return &Panel{
		Title: title, Description: desc, Type: "stat", Targets: targets,
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Color: map[string]string{"mode": "thresholds"}, Mappings: []any{}, Thresholds: t, Unit: unit,
		}, Overrides: []any{}},
		Options: map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "background", "graphMode": "area", "justifyMode": "auto",
			"orientation": "auto", "textMode": "value_and_name", "wideLayout": true,
			"showPercentChange": false, "percentChangeColorMode": "standard",
		},
	}
}

// table shows instant queries' labels and values, one row per series;
// hide names the columns left out and rename gives others a title.
func table(title, desc string, hide []string, rename map[string]string, targets ...Target) *Panel {
	exclude := map[string]any{}
	for _, h := range hide {
		exclude[h] = true
	}
	var tr []Transformation
	if len(targets) > 1 {
		tr = append(tr, Transformation{ID: "merge", Options: map[string]any{}})
	}
	tr = append(tr, Transformation{ID: "organize", Options: map[string]any{
		"excludeByName": exclude, "indexByName": map[string]any{}, "renameByName": rename,
	}})
	return &Panel{
		Title: title, Description: desc, Type: "table", Targets: targets, Transformations: tr,
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Custom:   map[string]any{"align": "auto", "cellOptions": map[string]any{"type": "auto"}, "inspect": false},
			Mappings: []any{}, Thresholds: base("green"), Unit: "",
		}, Overrides: []any{}},
		Options: map[string]any{
			"cellHeight": "sm", "showHeader": true, "frameIndex": 0,
			"footer": map[string]any{"show": false, "reducer": []string{"sum"}, "countRows": false, "fields": ""},
		},
	}
}

// timeline shows a 0/1 state per series over time, named by the two texts.
func timeline(title, desc, off, on string, target Target) *Panel {
	return &Panel{
		Title: title, Description: desc, Type: "state-timeline", Targets: []Target{target},
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Color:  map[string]string{"mode": "thresholds"},
			Custom: map[string]any{"fillOpacity": 80, "lineWidth": 0},
			Mappings: []any{map[string]any{"type": "value", "options": map[string]any{
				"0": map[string]any{"text": off, "color": "red", "index": 0},
				"1": map[string]any{"text": on, "color": "green", "index": 1},
			}}},
			Thresholds: base("green"), Unit: "",
		}, Overrides: []any{}},
		Options: map[string]any{
			"mergeValues": true, "showValue": "auto", "alignValue": "left", "rowHeight": 0.9,
			"legend":  map[string]any{"showLegend": false, "displayMode": "list", "placement": "bottom", "calcs": []string{}},
			"tooltip": map[string]any{"mode": "single", "sort": "none"},
		},
	}
}
