// Package browsertest holds idmint's tests that drive a real, headless
// Chromium against a running server: the dashboard's page and the
// browser-side attacks on administration (CSRF). It is a module of its own
// so that the browser driver (chromedp and its protocol packages) stays out
// of the main module's dependency graph; scripts/test.sh runs it.
package browsertest
