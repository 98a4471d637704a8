package session_test

import (
	stdctx "context"
	"crypto/ed25519"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkAppendDecision: the cost of one decision record on the agent's
// driver — chained, and signed with an ed25519 key — against a plain
// Append of an event of the same turn, the floor.
func BenchmarkAppendDecision(b *testing.B) {
	d := session.Decision{Stage: session.StageApproval, Verdict: "deny", Reason: "no deleting", Policy: "tools.permission:rules[0]",
		Inputs: session.InputsDigest("rm"), CallID: "call_1", Tool: "rm"}
	for _, signed := range []bool{false, true} {
		name := "chained"
		if signed {
			name = "signed"
		}
		b.Run(name, func(b *testing.B) {
			root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
			ctxtest.Cleanup(b, root)
			scope, _ := root.Scoped("a")
			st := session.NewStore()
			if signed {
				_, priv, _ := ed25519.GenerateKey(nil)
				signer, _ := session.NewSigner(priv)
				if err := st.SetSigner(root, signer); err != nil {
					b.Fatal(err)
				}
			}
			s, err := st.Create(scope, "a", "s")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.AppendDecision(stdctx.Background(), 1, 1, d)
			}
		})
	}
	b.Run("floor=append", func(b *testing.B) {
		root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
		ctxtest.Cleanup(b, root)
		scope, _ := root.Scoped("a")
		s, err := session.NewStore().Create(scope, "a", "s")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			s.Append(stdctx.Background(), session.Event{Type: session.StepEnd, Turn: 1, Step: 1})
		}
	})
}
