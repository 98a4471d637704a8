package all_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/admission/readygate"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/services/session"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// configs gives the built-ins that need one a config that starts offline.
func configs(t *testing.T) map[string]string {
	return map[string]string{
		"session.jsonl":         fmt.Sprintf("{dir: %q}", t.TempDir()),
		"llm.scripted":          `{replies: [{text: "hi"}]}`,
		"llm.openai":            `{api_key_env: DSH_TEST_MOUNT_KEY}`,
		"llm.deepseek":          `{api_key_env: DSH_TEST_MOUNT_KEY}`,
		"llm.anthropic":         `{api_key_env: DSH_TEST_MOUNT_KEY}`,
		"admission.rate-limit":  `{per_minute: 5}`,
		"admission.max-pending": `{max: 4}`,
		"admission.budget":      `{limits: [{name: t, per: session, tokens: 1000}]}`,
		"session.sign":          `{key_env: DSH_TEST_MOUNT_SIGN_KEY}`,
		"tools.mcp":             `{name: m, command: /bin/false, on_unavailable: skip}`,
		"policy.cel":            `{approval: [{name: no-bash, when: 'call.tool == "bash"', action: deny}]}`,
		"policy.reviewer":       `{provider: scripted, tools: [bash]}`,
	}
}

// configFor is id's test config; session.nats gets an embedded NATS
// server of the test's own, started only for it.
func configFor(t *testing.T, id string) (string, bool) {
	if id == "session.nats" {
		return fmt.Sprintf("{url: %q}", natstest.Single(t).ClientURL()), true
	}
	c, ok := configs(t)[id]
	return c, ok
}

// entry is one YAML list item using id with its test config.
func entry(t *testing.T, id string) string {
	e := "    - use: " + id + "\n"
	if c, ok := configFor(t, id); ok {
		e += "      config: " + c + "\n"
	}
	return e
}

// TestEveryBuiltinMountsAtTheRootOrInASharedPreset: scopes own services, so
// any built-in — including one that provides a service — can be mounted on
// the root or in a preset that two agents share.
func TestEveryBuiltinMountsAtTheRootOrInASharedPreset(t *testing.T) {
	t.Setenv("DSH_TEST_MOUNT_KEY", "not-a-real-key")
	t.Setenv("DSH_TEST_MOUNT_SIGN_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=") // a 32-byte seed
	infos := plugin.List()
	if len(infos) < 9 {
		t.Fatalf("only %d built-ins registered", len(infos))
	}
	for _, info := range infos {
		for _, where := range []string{"root", "preset"} {
			t.Run(info.ID+"/"+where, func(t *testing.T) {
				text := mountConfig(t, info.ID, where == "preset")
				cfg, err := config.Parse("mount.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
				if err != nil {
					t.Fatalf("config:\n%s\n%v", text, err)
				}
				h, err := hosttest.Start(cfg, host.Options{LogOutput: &strings.Builder{}})
				if err != nil {
					t.Fatalf("start:\n%s\n%v", text, err)
				}
				if len(hosttest.Agents(h)) != 2 {
					t.Fatalf("%d agents running", len(hosttest.Agents(h)))
				}
				if err := h.Close(stdctx.Background()); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// mountConfig mounts id on the root or in a preset shared by two agents,
// next to the offline model the agents talk to.
func mountConfig(t *testing.T, id string, inPreset bool) string {
	var b strings.Builder
	b.WriteString("plugins:\n")
	// The host checks an agent's provider before its presets mount, so the
	// root always has the one the agents name; llm.scripted in the preset
	// shadows it for each agent.
	b.WriteString(entry(t, "llm.scripted"))
	preset := ""
	if inPreset {
		b.WriteString("presets:\n  shared:\n")
		b.WriteString(entry(t, id))
		preset = "    preset: shared\n"
	} else if id != "llm.scripted" {
		b.WriteString(entry(t, id))
	}
	b.WriteString("agents:\n")
	for _, agent := range []string{"a1", "a2"} {
		b.WriteString("  - id: " + agent + "\n    provider: scripted\n" + preset)
	}
	return b.String()
}

// TestPresetServiceIsEachAgentsOwn: the ready gate provides a service; in a
// preset shared by two agents each agent's context reads its own gate,
// while the root — which has none — reads nothing.
func TestPresetServiceIsEachAgentsOwn(t *testing.T) {
	text := mountConfig(t, "admission.ready-gate", true)
	cfg, err := config.Parse("mount.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{LogOutput: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	var gates []*readygate.Gate
	for _, a := range hosttest.Agents(h) {
		g, err := readygate.Key.Get(a.Context())
		if err != nil {
			t.Fatalf("agent %s: %v", a.ID(), err)
		}
		gates = append(gates, g)
		// A root service reads through the agent's context too: that code
		// is outside any plugin, so no inject list applies.
		if _, err := session.Key.Get(a.Context()); err != nil {
			t.Fatalf("reading the root's sessions through agent %s: %v", a.ID(), err)
		}
	}
	if len(gates) != 2 || gates[0] == gates[1] {
		t.Fatal("each agent must read the gate of its own preset")
	}
	if _, err := readygate.Key.Get(h.Root()); !errs.HasCode(err, errs.ServiceUnavailable) {
		t.Fatalf("the root must not see a preset's service: %v", err)
	}
}
