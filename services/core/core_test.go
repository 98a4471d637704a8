package core_test

import (
	"path"
	"reflect"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is one core service: its key's name, the package its value's
// type lives in, and the plugin that provides it.
type service struct {
	key    string
	pkg    string
	plugin dshctx.Plugin
	// takes is the config type the plugin takes; "" for none.
	takes string
}

func row[T any](k dshctx.Key[T], p dshctx.Plugin, takes string) service {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return service{key: k.Name(), pkg: path.Base(t.PkgPath()), plugin: p, takes: takes}
}

// services are every service a host mounts: core.Plugins, then the ones
// mounted on top with a config of their own.
func services() []service {
	return []service{
		row(agents.Key, agents.Plugin, ""),
		row(session.Key, session.Plugin, ""),
		row(llm.Key, llm.Plugin, ""),
		row(approval.Key, approval.Plugin, ""),
		row(tools.Key, tools.Plugin, ""),
		row(systemprompt.Key, systemprompt.Plugin, ""),
		row(protect.Key, protect.Plugin, ""),
		row(agentcontroller.Key, agentcontroller.Plugin, ""),
		row(agentloop.Key, agentloop.Plugin, "agentloop.Config"),
		row(attachments.Key, attachments.Plugin, "attachments.Options"),
		row(attachments.Key, attachments.Provided(attachments.NewMemory(attachments.Limits{})), ""),
		row(sessions.Key, sessions.Plugin, "sessions.Options"),
	}
}

func newRoot(t *testing.T) *dshctx.Context {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	return root
}

// TestServiceNamesAgreeWithTheirPackages: a service is called after the
// package that holds it (camel case allowed), and so is the plugin that
// provides it — the log in package session is "session", the session
// service in package sessions is "sessions".
func TestServiceNamesAgreeWithTheirPackages(t *testing.T) {
	for _, s := range services() {
		if strings.ToLower(s.key) != s.pkg {
			t.Errorf("service %q lives in package %s; name it after the package", s.key, s.pkg)
		}
		if n := s.plugin.(dshctx.Named).Name(); n != s.key {
			t.Errorf("the plugin providing service %q is called %q; call it after the service", s.key, n)
		}
	}
	if len(core.Plugins()) != 7 {
		t.Errorf("core.Plugins has %d plugins; list each in services() above", len(core.Plugins()))
	}
}

// TestErrorsNameTheServicesByTheirNewNames: what a reader without a
// provider is told names the service as the package does.
func TestErrorsNameTheServicesByTheirNewNames(t *testing.T) {
	root := newRoot(t)
	_, err := session.Key.Get(root)
	if !errs.HasCode(err, errs.ServiceUnavailable) || !strings.Contains(err.Error(), `service "session" `) {
		t.Fatalf("reading the session log without a provider: %v", err)
	}
	_, err = sessions.Key.Get(root)
	if !errs.HasCode(err, errs.ServiceUnavailable) || !strings.Contains(err.Error(), `service "sessions" `) || strings.Contains(err.Error(), "sessionController") {
		t.Fatalf("reading the session service without a provider: %v", err)
	}
}

// TestACoreServiceRefusesAConfigOfAnotherType: a wrong config is refused
// when it is handed over — even for a service still waiting for the ones
// it injects — with a code, the service's name and the type it takes.
func TestACoreServiceRefusesAConfigOfAnotherType(t *testing.T) {
	for _, s := range services() {
		root := newRoot(t)
		f, err := root.Plugin(s.plugin, map[string]any{"dir": "/tmp"})
		if f != nil || !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) {
			t.Errorf("%s: want no fiber and INVALID_ARGUMENT %s; got %v, %v", s.key, dshctx.ReasonInvalidConfig, f, err)
			continue
		}
		want := s.key + ": takes no config, but was given one of type map[string]interface {}; pass nil"
		if s.takes != "" {
			want = s.key + ": the config has type map[string]interface {}; pass " + s.takes + ", *" + s.takes + " or nil (the defaults)"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: the error should say %q; got %v", s.key, want, err)
		}
	}
}
