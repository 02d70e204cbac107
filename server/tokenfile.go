package server

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxTokenFile bounds what readToken reads: a token is a line, not a file.
const maxTokenFile = 4 << 10

// envToken applies the environment's NAME and NAME_FILE to a token and its
// file field: either one replaces both of the config's forms (the
// environment wins over the file, as for every other field); both at once
// is an error naming them.
func envToken(getenv func(string) string, name string, token, file *string, fromFile *bool) error {
	v, f := getenv(name), getenv(name+"_FILE")
	switch {
	case v != "" && f != "":
		return fmt.Errorf("server: %s and %s_FILE are both set; give one", name, name)
	case v != "":
		*token, *file, *fromFile = v, "", false
	case f != "":
		*token, *file, *fromFile = "", f, false
	}
	return nil
}

// readToken reads the token field's file, when one is named, into token:
// the file's first line without its line break (a Kubernetes Secret's
// file has none; one written with echo has one). An unreadable, empty or
// oversized file, or a token given both ways, is an error naming the
// field and the path, never the content. fromFile records a read, so a
// second call finds the token it read, not a conflict.
func readToken(field string, token *string, path string, fromFile *bool) error {
	if path == "" || *fromFile {
		return nil
	}
	if *token != "" {
		return fmt.Errorf("server: %s and %s_file are both given; give one", field, field)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("server: %s_file %q: %v", field, path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return fmt.Errorf("server: %s_file %q: %v", field, path, err)
	}
	if len(b) > maxTokenFile {
		return fmt.Errorf("server: %s_file %q is larger than %d bytes; want a file holding one token", field, path, maxTokenFile)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSuffix(tok, "\r")
	if tok == "" {
		return fmt.Errorf("server: %s_file %q holds no token (its first line is empty)", field, path)
	}
	*token, *fromFile = tok, true
	return nil
}
