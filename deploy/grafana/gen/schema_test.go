package main

import (
	"errors"
	"os"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// sdkErr is err, or nil for the SDK's empty error list (its strict
// decoders return an empty cog.BuildErrors as a non-nil error).
func sdkErr(err error) error {
	var be cog.BuildErrors
	if errors.As(err, &be) && len(be) == 0 {
		return nil
	}
	return err
}

// TestGrafanaSchema decodes the committed dashboard with the Grafana
// Foundation SDK's strict decoder, whose types are generated from
// Grafana's own schema of dashboards and of each panel plugin's options
// and field config: a misspelt or unknown field, a value of the wrong
// type or a required field left out fails, naming its path.
func TestGrafanaSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	b, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	var d sdk.Dashboard
	if err := sdkErr(d.UnmarshalJSONStrict(b)); err != nil {
		t.Fatalf("%s does not follow Grafana's dashboard schema:\n%v", committed, err)
	}
	if err := sdkErr(d.Validate()); err != nil {
		t.Fatalf("%s: %v", committed, err)
	}
	if len(d.Panels) != len(panels(load(t))) {
		t.Fatalf("the SDK decoded %d panels, the file has %d", len(d.Panels), len(panels(load(t))))
	}
}
