package openai_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/openai"
	"github.com/dsh-go/dsh/services/llm"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestBaseURLKeepsTheDefaultKeyVariable(t *testing.T) {
	s, rec := server(t, answer{File: "text.sse"})
	p, err := openai.NewDeepSeek(openai.Config{Common: httpx.Common{BaseURL: s.URL, Model: "m"}}, env("DEEPSEEK_API_KEY", "sk-ds"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(t, p, hello()); err != nil {
		t.Fatal(err)
	}
	if got := rec.Headers()[0].Get("Authorization"); got != "Bearer sk-ds" {
		t.Fatalf("a proxy behind base_url must get the key of DEEPSEEK_API_KEY; Authorization %q", got)
	}
}

func TestUnauthorizedNamesTheVariableUsedOrUnset(t *testing.T) {
	reject := answer{Status: 401, Body: `{"error":{"message":"no key"}}`}
	cases := []struct {
		name, want string
		getenv     func(string) string
		apiKeyEnv  string
		sent       bool
	}{
		{"used", "read from DEEPSEEK_API_KEY", env("DEEPSEEK_API_KEY", "sk-bad"), "", true},
		{"unset", "DEEPSEEK_API_KEY is not set", env(), "", false},
		{"none", "api_key_env: none", env("DEEPSEEK_API_KEY", "sk-ds"), "none", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, rec := server(t, reject)
			p, err := openai.NewDeepSeek(openai.Config{Common: httpx.Common{BaseURL: s.URL, Model: "m", APIKeyEnv: c.apiKeyEnv}}, c.getenv)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = collect(t, p, hello())
			if !errs.Has(err, llm.ProviderFailed, httpx.ReasonUnauthorized) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the 401 must say %q: %v", c.want, err)
			}
			if sent := rec.Headers()[0].Get("Authorization") != ""; sent != c.sent {
				t.Fatalf("Authorization sent=%v, want %v", sent, c.sent)
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Fatal("the key leaked into the error")
			}
		})
	}
}
