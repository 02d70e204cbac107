// Package doccheck holds the tests that keep the README and docs/ true to
// the code: every config field documented, every link pointing at a file
// of the repository, the README a front door of at most 300 lines.
package doccheck
