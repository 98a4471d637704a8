package otlptest

import (
	"os"
	"path/filepath"
	"testing"
)

// The cached binary is rebuilt when the module's pins or code change, and
// only then: a stray file in the directory does not cost a rebuild.
func TestKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module m\n")
	write("go.sum", "a v1 h1:x\n")
	write("main.go", "package main\n")
	k0, err := key(dir)
	if err != nil {
		t.Fatal(err)
	}
	write("otelcol", "a binary built here")
	if k, _ := key(dir); k != k0 {
		t.Fatal("a stray file changed the key")
	}
	write("go.sum", "a v2 h1:y\n")
	k1, _ := key(dir)
	if k1 == k0 {
		t.Fatal("a new go.sum kept the key")
	}
	write("main.go", "package main // changed\n")
	if k, _ := key(dir); k == k1 {
		t.Fatal("changed code kept the key")
	}
}
