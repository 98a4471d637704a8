package host_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// presetStoresConfig has a store in a preset (dir %[1]s) and, when %[2]s
// is set, one at the root in another directory.
const presetStoresConfig = `
plugins:
  - use: llm.scripted
    config: {replies: [{text: hi}]}
%[2]s
presets:
  keep:
    - use: session.jsonl
      config: {dir: %[1]s}
  again:
    - use: session.jsonl
      config: {dir: %[1]s}
agents:
  - id: kept
    provider: scripted
    presets: [keep]
  - id: also
    provider: scripted
    presets: [again]
  - id: plain
    provider: scripted
`

func rootStore(dir string) string {
	return fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %s}\n", dir)
}

// runSession opens a session of agent under id, prompts it once and
// closes it, so its log is on disk.
func runSession(t *testing.T, h *host.Host, agent, id string) {
	t.Helper()
	ctx := stdctx.Background()
	s, err := h.Sessions().Open(ctx, sessions.OpenOptions{Agent: agent, SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	h.Sessions().Idle(ctx, s.ID())
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func listed(t *testing.T, h *host.Host) []string {
	t.Helper()
	list, err := h.Sessions().List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestPresetStoresAreListedDeletedAndResumed: with no root store, what a
// preset's store wrote is listed (once, though two presets mount that
// directory), resumed and deleted through the session controller.
func TestPresetStoresAreListedDeletedAndResumed(t *testing.T) {
	dir := t.TempDir()
	h := start(t, fmt.Sprintf(presetStoresConfig, dir, ""))
	runSession(t, h, "kept", "k1")
	runSession(t, h, "also", "a1")
	if got := listed(t, h); !slices.Equal(got, []string{"a1", "k1"}) {
		t.Fatalf("listed %v", got)
	}
	s, err := h.Sessions().Resume(stdctx.Background(), "k1", sessions.OpenOptions{Agent: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Log().Len(); n == 0 {
		t.Fatal("the resumed session has no history")
	}
	if err := s.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Sessions().Delete(stdctx.Background(), "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "k1.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("the deleted log is still there: %v", err)
	}
	if err := h.Sessions().Delete(stdctx.Background(), "k1"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if got := listed(t, h); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("listed %v after the delete", got)
	}
}

// TestPresetStoresBesideARootStore: a root store in another directory
// keeps the root's backend; the preset's sessions are listed and deleted
// beside the root's.
func TestPresetStoresBesideARootStore(t *testing.T) {
	dir, rootDir := t.TempDir(), t.TempDir()
	h := start(t, fmt.Sprintf(presetStoresConfig, dir, rootStore(rootDir)))
	runSession(t, h, "kept", "k1")
	runSession(t, h, "plain", "p1")
	if got := listed(t, h); !slices.Equal(got, []string{"k1", "p1"}) {
		t.Fatalf("listed %v", got)
	}
	if err := h.Sessions().Delete(stdctx.Background(), "k1"); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, h); !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("listed %v after the delete", got)
	}
}

// TestReloadMovesAStoreToTheRoot: the catalog that served as the root's
// backend gives way to a root store a reload adds, and comes back as the
// backend when the reload removes it.
func TestReloadMovesAStoreToTheRoot(t *testing.T) {
	dir, rootDir := t.TempDir(), t.TempDir()
	h := start(t, fmt.Sprintf(presetStoresConfig, dir, ""))
	runSession(t, h, "kept", "k1")
	if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(presetStoresConfig, dir, rootStore(rootDir)))); err != nil {
		t.Fatal(err)
	}
	runSession(t, h, "plain", "p1")
	if got := listed(t, h); !slices.Equal(got, []string{"k1", "p1"}) {
		t.Fatalf("listed %v with the root store", got)
	}
	if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(presetStoresConfig, dir, ""))); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, h); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("listed %v without the root store", got)
	}
	s, err := h.Sessions().Resume(stdctx.Background(), "k1", sessions.OpenOptions{Agent: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCloseDisposesThePresetCatalog: the catalog's stores go with the host
// (goleak in TestMain checks their goroutines), locks released: a second
// host over the same directory deletes what the first wrote.
func TestCloseDisposesThePresetCatalog(t *testing.T) {
	dir := t.TempDir()
	cfg := mustParse(t, fmt.Sprintf(presetStoresConfig, dir, ""))
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runSession(t, h, "kept", "k1")
	if err := h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	h2 := start(t, fmt.Sprintf(presetStoresConfig, dir, ""))
	if err := h2.Sessions().Delete(stdctx.Background(), "k1"); err != nil {
		t.Fatal(err)
	}
}

// TestAPresetStoreStartsWhenFirstNeeded: the catalog starts on the first
// listing, not with the host, so a preset store that cannot start (its
// directory cannot be made) fails that listing, naming the entry, while
// the host and an agent without the preset run.
func TestAPresetStoreStartsWhenFirstNeeded(t *testing.T) {
	h, err := host.Start(mustParse(t, `
plugins:
  - use: llm.scripted
    config: {replies: [{text: hi}]}
presets:
  broken:
    - use: session.jsonl
      config: {dir: /dev/null/sessions}
agents:
  - id: kept
    provider: scripted
    preset: broken
  - id: plain
    provider: scripted
`), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatalf("a preset store no agent opened failed the start: %v", err)
	}
	defer h.Close(stdctx.Background())
	ctx := stdctx.Background()
	s, err := h.Sessions().Open(ctx, sessions.OpenOptions{Agent: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = h.Sessions().List(ctx)
	if !errs.HasCode(err, host.StartFailed) || !strings.Contains(err.Error(), "presets.broken[0]") {
		t.Fatalf("listing with a broken preset store: %v", err)
	}
}
