package entry_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestTheEntryImportsTheStandardLibraryOnly guards the launch cost: Go
// initializes a package once everything it imports is, and among ready
// packages by import path, so one third-party import would hold the
// entry back until that package's own dependencies, and everything that
// sorts before it, ran their init.
func TestTheEntryImportsTheStandardLibraryOnly(t *testing.T) {
	pkg, err := build.Import("github.com/dsh-go/dsh/internal/sandbox/entry", ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("the entry imports %s, which is not in the standard library", imp)
		}
	}
}
