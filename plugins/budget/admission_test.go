package budget_test

import (
	stdctx "context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/admission/maxpending"
	"github.com/dsh-go/dsh/plugins/budget"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/usage"
)

// decisions records the admission stage's decisions as the listener
// before every plugin sees them.
func decisions(t *testing.T, e *testkit.Env) *[]agentcontroller.Decision {
	var got []agentcontroller.Decision
	if _, err := agentcontroller.EventAdmission.On(e.Root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		d, err := next.Call(ctx, a)
		got = append(got, d)
		return d, err
	}); err != nil {
		t.Fatal(err)
	}
	return &got
}

func from(p agentcontroller.Principal, text string) agentcontroller.Request {
	r := testkit.Send(text)
	r.Source.Principal = p
	return r
}

// TestPromptsPerWindow: a tenant's prompts are counted across its
// principals; the one too many is refused, named by the budget, with a
// decision that names the policy and its version; a prompt a later
// listener refuses does not count.
func TestPromptsPerWindow(t *testing.T) {
	e := testkit.New(t)
	got := decisions(t, e)
	cfg := budget.Config{}.Defaults()
	cfg.Limits = []budget.Limit{{Name: "tenant-hourly", Per: budget.PerTenant, Window: time.Hour, Prompts: 2}}
	e.Apply(budget.Plugin, cfg)
	e.Apply(maxpending.Plugin, maxpending.Config{Max: 1})
	a := e.Agent("main@s1")
	ctx := stdctx.Background()
	ann := agentcontroller.Principal{Kind: "user", ID: "ann", Tenant: "acme"}
	bob := agentcontroller.Principal{Kind: "token", ID: "bob", Tenant: "acme"}
	if _, err := e.Controller.Deliver(ctx, a, from(ann, "1")); err != nil {
		t.Fatal(err)
	}
	// Refused by max-pending, after the budget counted it: uncounted.
	if _, err := e.Controller.Deliver(ctx, a, from(bob, "2")); !errs.Has(err, agentcontroller.RejectedCode, maxpending.Reason) {
		t.Fatalf("want max-pending's refusal: %v", err)
	}
	a.Take()
	if _, err := e.Controller.Deliver(ctx, a, from(bob, "3")); err != nil {
		t.Fatalf("the tenant's second prompt: %v", err)
	}
	a.Take()
	_, err := e.Controller.Deliver(ctx, a, from(ann, "4"))
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != budget.ReasonPrompts {
		t.Fatalf("the third prompt: %v", err)
	}
	want := regexp.MustCompile(`^budget "tenant-hourly": tenant "acme" has sent its 2 prompts of the current 1h0m0s window; it resets at \d{4}-\d\d-\d\dT\d\d:00:00Z \(in \d+m?\d*s?\): send it again then, or raise prompts of limit "tenant-hourly" in the budget plugin's config$`)
	if !want.MatchString(ref.Message) {
		t.Fatalf("refusal message %q", ref.Message)
	}
	last := (*got)[len(*got)-1]
	if last.Policy != budget.Policy || last.Reason != budget.ReasonPrompts || len(last.PolicyVersion) != 16 {
		t.Fatalf("the decision: %+v", last)
	}
	// A principal of another tenant has a budget of its own.
	if _, err := e.Controller.Deliver(ctx, a, from(agentcontroller.Principal{Kind: "user", ID: "cy", Tenant: "other"}, "5")); err != nil {
		t.Fatal(err)
	}
}

// TestTheWindowResets: a window's count starts again at its end.
func TestTheWindowResets(t *testing.T) {
	e := testkit.New(t)
	cfg := budget.Config{}.Defaults()
	cfg.Limits = []budget.Limit{{Name: "w", Per: budget.PerAgent, Window: time.Second, Prompts: 1}}
	e.Apply(budget.Plugin, cfg)
	a := e.Agent("main@s1")
	ctx := stdctx.Background()
	// Start just after a window began, so the two first prompts share it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	if _, err := e.Controller.Deliver(ctx, a, testkit.Send("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Controller.Deliver(ctx, a, testkit.Send("2")); !errs.Has(err, agentcontroller.RejectedCode, budget.ReasonPrompts) {
		t.Fatalf("the second prompt of the window: %v", err)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	if _, err := e.Controller.Deliver(ctx, a, testkit.Send("3")); err != nil {
		t.Fatalf("the first prompt of the next window: %v", err)
	}
}

// TestBadConfigsSayWhatToFix: each mistake is reported at config load,
// naming the key and the fix.
func TestBadConfigsSayWhatToFix(t *testing.T) {
	for _, c := range []struct{ limits, want string }{
		{`[]`, "limits is empty"},
		{`[{name: a, per: user, tokens: 1}]`, `limits[0].per is "user"; use principal, tenant, agent or session`},
		{`[{name: "a b", per: session, tokens: 1}]`, `limits[0].name "a b"`},
		{`[{name: a, per: session}]`, "limits[0] (a) sets no ceiling"},
		{`[{name: a, per: session, prompts: 3}]`, "limits[0].prompts needs a window"},
		{`[{name: a, per: session, cost: 2}]`, "limits[0].cost needs prices: add a pricing: key"},
		{`[{name: a, per: session, tokens: 1}, {name: a, per: agent, tokens: 2}]`, `limits[1].name "a" is also limits[0]'s`},
	} {
		text := "plugins:\n  - use: admission.budget\n    config:\n      limits: " + c.limits + "\n"
		_, err := config.Parse("b.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "plugins[0].config") {
			t.Errorf("limits %s: got %v, want %q", c.limits, err, c.want)
		}
	}
	// With a price table, a cost limit loads.
	text := "pricing: {models: {m: {input: 1, output: 1}}}\nplugins:\n  - use: admission.budget\n    config:\n      limits: [{name: a, per: session, cost: 2}]\n"
	if _, err := config.Parse("b.yaml", []byte(text), config.LoadOptions{Environ: []string{}}); err != nil {
		t.Fatal(err)
	}
	// A Go program's config without pricing is refused at apply.
	e := testkit.New(t)
	cfg := budget.Config{}.Defaults()
	cfg.Limits = []budget.Limit{{Name: "a", Per: budget.PerSession, Cost: 1}}
	if _, err := e.Root.Plugin(budget.Plugin, cfg); !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) {
		t.Fatalf("a cost limit without prices: %v", err)
	}
	cfg = cfg.WithPricing(usage.Pricing{Models: map[string]usage.Price{"m": {Input: 1}}})
	e.Apply(budget.Plugin, cfg)
}

// TestAPanicAfterTheBudgetUncountsThePrompt: a listener after the budget
// that panics fails the delivery, and unwinds the budget's listener
// instead of returning an error to it (the waterfall recovers once per
// dispatch): the prompt it counted is uncounted all the same.
func TestAPanicAfterTheBudgetUncountsThePrompt(t *testing.T) {
	e := testkit.New(t)
	cfg := budget.Config{}.Defaults()
	cfg.Limits = []budget.Limit{{Name: "one", Per: budget.PerAgent, Window: time.Hour, Prompts: 1}}
	e.Apply(budget.Plugin, cfg)
	if _, err := agentcontroller.EventAdmission.On(e.Root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "boom" {
			panic("a listener after the budget broke")
		}
		return next.Call(ctx, a)
	}); err != nil {
		t.Fatal(err)
	}
	a := e.Agent("main@s1")
	ctx := stdctx.Background()
	if _, err := e.Controller.Deliver(ctx, a, testkit.Send("boom")); !errs.HasCode(err, errs.ListenerFailed) {
		t.Fatalf("want LISTENER_FAILED: %v", err)
	}
	if _, err := e.Controller.Deliver(ctx, a, testkit.Send("after")); err != nil {
		t.Fatalf("the prompt after the panic: %v", err)
	}
}
