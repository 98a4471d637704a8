package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// write creates files under dir: path → content ("" for an empty folder
// when the path ends in "/").
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(path))
		if strings.HasSuffix(path, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(path, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// env is a lookup over a fixed environment.
func env(kv ...string) func(string) (string, bool) { return EnvLookup(kv) }

// mustProblems loads dir and returns its problems, failing when it loads.
func mustProblems(t *testing.T, dir string, lookup func(string) (string, bool)) []string {
	t.Helper()
	b, err := Load(dir, lookup)
	if err == nil {
		t.Fatalf("loaded %+v; want problems", b)
	}
	return Problems(err)
}

func containsAll(t *testing.T, got []string, want ...string) {
	t.Helper()
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
}
