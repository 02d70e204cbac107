package main

// The parts of Grafana's dashboard JSON model this dashboard uses, as
// Grafana 10 and 11 export them (schemaVersion 39; the model is described
// in Grafana's documentation, "JSON model" of a dashboard). Struct fields
// keep the order of the committed JSON stable.

// Dashboard is the whole JSON document.
type Dashboard struct {
	Annotations   Annotations `json:"annotations"`
	Description   string      `json:"description"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"` // 1: the crosshair is shared across panels
	ID            *int        `json:"id"`           // null: the Grafana that imports it assigns one
	Links         []Link      `json:"links"`
	Panels        []*Panel    `json:"panels"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Tags          []string    `json:"tags"`
	Templating    Templating  `json:"templating"`
	Time          TimeRange   `json:"time"`
	Timepicker    struct{}    `json:"timepicker"`
	Timezone      string      `json:"timezone"`
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	Version       int         `json:"version"`
}

// Annotations holds Grafana's built-in annotation query.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is one annotation query.
type Annotation struct {
	BuiltIn    int         `json:"builtIn"`
	Datasource *Datasource `json:"datasource"`
	Enable     bool        `json:"enable"`
	Hide       bool        `json:"hide"`
	IconColor  string      `json:"iconColor"`
	Name       string      `json:"name"`
	Type       string      `json:"type"`
}

// Link is a dashboard link.
type Link struct {
	Title       string `json:"title"`
	Type        string `json:"type"`
	URL         string `json:"url"`
	TargetBlank bool   `json:"targetBlank"`
	Icon        string `json:"icon"`
}

// Datasource refers to a data source by type and uid; "${datasource}"
// is the value of the dashboard's datasource variable.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a template variable: the data source, or a query of label
// values.
type Variable struct {
	Current     Current     `json:"current"`
	Datasource  *Datasource `json:"datasource,omitempty"`
	Definition  string      `json:"definition,omitempty"`
	Description string      `json:"description"`
	Hide        int         `json:"hide"`
	IncludeAll  bool        `json:"includeAll"`
	AllValue    string      `json:"allValue,omitempty"`
	Label       string      `json:"label"`
	Multi       bool        `json:"multi"`
	Name        string      `json:"name"`
	Options     []struct{}  `json:"options"`
	Query       any         `json:"query"` // "prometheus" for the datasource variable, a VariableQuery otherwise
	Refresh     int         `json:"refresh"`
	Regex       string      `json:"regex"`
	Sort        int         `json:"sort,omitempty"`
	Type        string      `json:"type"`
}

// Current is a variable's value when the dashboard opens.
type Current struct {
	Text  any `json:"text"`  // a string, or a list with multi
	Value any `json:"value"` // a string, or a list with multi
}

// VariableQuery is a Prometheus label-values query as Grafana's
// Prometheus variable editor saves it (qryType 1: label values).
type VariableQuery struct {
	QryType int    `json:"qryType"`
	Query   string `json:"query"`
	RefID   string `json:"refId"`
}

// GridPos places a panel: 24 columns, rows of about 30 pixels.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is a row, a time series, a stat, a table or a state timeline.
type Panel struct {
	Collapsed       *bool            `json:"collapsed,omitempty"` // rows only
	Datasource      *Datasource      `json:"datasource,omitempty"`
	Description     string           `json:"description,omitempty"`
	FieldConfig     *FieldConfig     `json:"fieldConfig,omitempty"`
	GridPos         GridPos          `json:"gridPos"`
	ID              int              `json:"id"`
	Options         map[string]any   `json:"options,omitempty"`
	Panels          *[]*Panel        `json:"panels,omitempty"` // a row's panels while it is collapsed
	Targets         []Target         `json:"targets,omitempty"`
	Title           string           `json:"title"`
	Transformations []Transformation `json:"transformations,omitempty"`
	Type            string           `json:"type"`
}

// FieldConfig sets units, thresholds and value mappings.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the field settings of every series in a panel.
type FieldDefaults struct {
	Color      map[string]string `json:"color,omitempty"`
	Custom     map[string]any    `json:"custom,omitempty"`
	Decimals   *int              `json:"decimals,omitempty"`
	Mappings   []any             `json:"mappings"`
	Max        *float64          `json:"max,omitempty"`
	Min        *float64          `json:"min,omitempty"`
	Thresholds Thresholds        `json:"thresholds"`
	Unit       string            `json:"unit"`
}

// Thresholds colour values from the base colour up.
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is one threshold; the first has a null value (the base).
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// Target is one PromQL query of a panel.
type Target struct {
	Datasource   *Datasource `json:"datasource"`
	EditorMode   string      `json:"editorMode"`
	Expr         string      `json:"expr"`
	Format       string      `json:"format,omitempty"`
	Instant      bool        `json:"instant"`
	LegendFormat string      `json:"legendFormat"`
	Range        bool        `json:"range"`
	RefID        string      `json:"refId"`
}

// Transformation reshapes a panel's query results (tables).
type Transformation struct {
	ID      string         `json:"id"`
	Options map[string]any `json:"options"`
}
