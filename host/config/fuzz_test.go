package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
)

// FuzzParse feeds the config decoder arbitrary files: whatever the input, it
// returns a config or a CONFIG_INVALID error that names the file — never a
// panic, never another kind of error. The seeds are the shipped config and
// every bad config of the golden tests.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bad/*.yaml")
	seeds = append(seeds, "../../config.yaml")
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("fuzz.yaml", data, config.LoadOptions{Environ: []string{}})
		switch {
		case err == nil && cfg == nil:
			t.Fatal("no config and no error")
		case err != nil && !errs.HasCode(err, config.Invalid):
			t.Fatalf("want %s, got %v", config.Invalid, err)
		case err != nil && !strings.Contains(err.Error(), "fuzz.yaml"):
			t.Fatalf("the error does not name the file: %v", err)
		}
	})
}
