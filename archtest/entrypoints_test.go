package archtest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/dsh-go/dsh/"

// entryPoints are the package trees that hold sessions, never agents.
var entryPoints = []string{"cmd", "serve", "acp", "cluster"}

// agentPackages are what an entry point must not import.
var agentPackages = []string{mod + "services/agents", mod + "services/agentloop", mod + "services/agentcontroller"}

// allowed lists imports of agent packages an entry point is let off, by
// package. It is empty and stays so: every entry point holds sessions. The
// check keeps reporting an allowance no longer used, so an exception added
// while porting goes with the port.
var allowed = map[string][]string{}

// TestEntryPointsHoldSessionsNotAgents fails when an entry point imports
// an agent package it is not allowed to, or no longer imports one it is.
func TestEntryPointsHoldSessionsNotAgents(t *testing.T) {
	imports := listImports(t)
	for _, must := range []string{mod + "cmd/dsh", mod + "serve", mod + "acp", mod + "cluster", mod + "serve/webhook"} {
		if _, ok := imports[must]; !ok {
			t.Fatalf("go list did not report %s; the check would prove nothing", must)
		}
	}
	if len(allowed) != 0 {
		t.Errorf("the allow-list holds %v; entry points hold sessions, never agents, with no exception: port the package to services/sessions instead", allowed)
	}
	for _, problem := range check(imports, allowed) {
		t.Error(problem)
	}
}

// TestTheCheckRefusesAnEntryPointImportingAnAgentPackage feeds the check
// a package that breaks the rule and one whose allowance went stale.
func TestTheCheckRefusesAnEntryPointImportingAnAgentPackage(t *testing.T) {
	imports := map[string][]string{
		mod + "serve/newthing": {mod + "services/sessions", mod + "services/agents"},
		mod + "acp/legacy":     {mod + "services/sessions", mod + "services/agentloop"},
		mod + "cluster":        {mod + "services/sessions"},
		mod + "plugins/x":      {mod + "services/agents"}, // not an entry point
	}
	// A fixture allow-list, not the real one (which is empty): acp/legacy
	// is let off its import, cluster's allowance went stale.
	allow := map[string][]string{
		mod + "acp/legacy": {mod + "services/agentloop"},
		mod + "cluster":    {mod + "services/agentcontroller"},
	}
	got := check(imports, allow)
	all := strings.Join(got, "\n")
	if len(got) != 2 || !strings.Contains(all, "serve/newthing imports "+mod+"services/agents") ||
		!strings.Contains(all, "cluster no longer imports "+mod+"services/agentcontroller") {
		t.Fatalf("check reported %q; want the forbidden import and the stale allowance", got)
	}
	if strings.Contains(all, "acp/legacy") || strings.Contains(all, "plugins/x") {
		t.Fatalf("check reported %q; an allowed import and a package that is no entry point are no problem", got)
	}
}

// check returns what breaks the rule: forbidden imports of entry points,
// and allowances no longer used.
func check(imports map[string][]string, allow map[string][]string) []string {
	var problems []string
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, pkg := range pkgs {
		if !isEntryPoint(pkg) {
			continue
		}
		for _, dep := range imports[pkg] {
			if slices.Contains(agentPackages, dep) && !slices.Contains(allow[pkg], dep) {
				problems = append(problems, pkg+" imports "+dep+": entry points hold sessions, never agents; use services/sessions (its Service, Source, Mode and codes) instead")
			}
		}
	}
	for pkg, deps := range allow {
		for _, dep := range deps {
			if got, listed := imports[pkg]; listed && !slices.Contains(got, dep) {
				problems = append(problems, pkg+" no longer imports "+dep+": remove it from the allow-list in archtest, which only shrinks")
			}
		}
	}
	return problems
}

func isEntryPoint(pkg string) bool {
	for _, root := range entryPoints {
		if pkg == mod+root || strings.HasPrefix(pkg, mod+root+"/") {
			return true
		}
	}
	return false
}

// listImports runs go list over the entry points: the non-test imports of
// each package.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test runs go list and needs the go command on PATH: %v", err)
	}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}
	for _, root := range entryPoints {
		args = append(args, mod+root+"/...")
	}
	out, err := exec.Command(gobin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	return imports
}

// TestOnlyTestsReachTheAgent fails when a file outside services/sessions
// calls Session.UnportedAgent, the accessor left from before the entry
// points held sessions: no production code needs it any more. Tests are
// exempt: they drive agents on purpose.
func TestOnlyTestsReachTheAgent(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var callers []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || rel == filepath.Join("services", "sessions") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), ".UnportedAgent()") {
			callers = append(callers, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range callers {
		t.Errorf("%s calls Session.UnportedAgent: entry points hold sessions, never agents; use the session service (Info, History, Wait, Attach, Cancel), and for what must run in the agent's scope a plugin entry of the session (OpenOptions.Entries)", c)
	}
}
