package main

import (
	"strings"

	"github.com/idmint/idmint/server"
)

// placeholderMarks are the words the shipped example files put in a secret
// (deploy/systemd/idmint.env.example: CHANGE-ME-...). A secret that still
// contains one was copied without being changed.
var placeholderMarks = []string{"change-me", "changeme", "change_me", "replace-me", "placeholder"}

// isPlaceholder reports whether secret still reads like an example value.
func isPlaceholder(secret string) bool {
	s := strings.ToLower(secret)
	for _, m := range placeholderMarks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// refusePlaceholderSecrets refuses a configuration whose admin or metrics
// token is still an example file's placeholder: `serve --check` and `serve`
// both call it.
func refusePlaceholderSecrets(cfg *server.Config) error {
	if cfg.AdminToken != "" && isPlaceholder(cfg.AdminToken) {
		return usagef("admin_token (env IDMINT_ADMIN_TOKEN) is still the example placeholder %q; set a long random one, e.g. openssl rand -hex 24", cfg.AdminToken)
	}
	if cfg.MetricsToken != "" && isPlaceholder(cfg.MetricsToken) {
		return usagef("metrics_token (env IDMINT_METRICS_TOKEN) is still the example placeholder %q; set a long random one, e.g. openssl rand -hex 24", cfg.MetricsToken)
	}
	return nil
}
