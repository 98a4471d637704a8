package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	printTable(os.Stdout)
	if dir != "" {
		os.RemoveAll(dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// scale multiplies the tries of every fault: DSH_FAULTS_N for a long run,
// 1 in CI.
func scale() int {
	n, err := strconv.Atoi(os.Getenv("DSH_FAULTS_N"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

var (
	buildOnce sync.Once
	dir       string
	buildErr  error
)

// bins are the binaries the suite runs, built once per run.
type bins struct{ dsh, testplugin, faultplugin string }

func binaries(t *testing.T) bins {
	t.Helper()
	buildOnce.Do(func() {
		dir, buildErr = os.MkdirTemp("", "dsh-faults")
		if buildErr != nil {
			return
		}
		for out, pkg := range map[string]string{
			"dsh":         "../../cmd/dsh",
			"testplugin":  "../../host/internal/testplugin",
			"faultplugin": "./internal/faultplugin",
		} {
			b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins{filepath.Join(dir, "dsh"), filepath.Join(dir, "testplugin"), filepath.Join(dir, "faultplugin")}
}
