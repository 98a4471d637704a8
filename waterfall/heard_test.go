package waterfall_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/waterfall"
)

// TestHeardSaysWhetherAnEmitReachesAListener: untagged listeners are heard
// everywhere, a scope's only in that scope, and none once removed.
func TestHeardSaysWhetherAnEmitReachesAListener(t *testing.T) {
	root := quietRoot(t)
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	ev := waterfall.NewEmit[int]("test/heard")
	if ev.Heard(root) || ev.Heard(a) {
		t.Fatal("heard with no listener")
	}
	off, err := ev.On(a, func(stdctx.Context, int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Heard(a) || ev.Heard(b) {
		t.Fatalf("a scoped listener: heard in a %v, in b %v", ev.Heard(a), ev.Heard(b))
	}
	off()
	if ev.Heard(a) {
		t.Fatal("heard after the listener was removed")
	}
	if _, err := ev.On(root, func(stdctx.Context, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !ev.Heard(a) || !ev.Heard(b) || !ev.Heard(root) {
		t.Fatal("an untagged listener is heard everywhere")
	}
}
