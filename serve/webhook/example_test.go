package webhook_test

import (
	"bytes"
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/hashicorp/go-hclog"
)

// A webhook mounted at /hooks/ (no bearer auth: the signature
// authenticates), and a signed delivery to it.
func Example() {
	cfg, err := config.Parse("config.yaml", []byte(`
plugins:
  - use: llm.scripted
agents:
  - id: main
    provider: scripted
serve:
  webhooks:
    deploy:
      secret_env: DEPLOY_SECRET
      session: deploys
      prompt: "Deployment {{.Body.id}} finished with status {{.Body.status}}; check it."
`), config.LoadOptions{Environ: []string{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close(stdctx.Background())
	hooks, err := webhook.New(webhook.Options{Sessions: h.Sessions(), Config: cfg,
		Getenv: func(k string) string { return map[string]string{"DEPLOY_SECRET": "s3cret"}[k] }})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer hooks.Close(stdctx.Background())
	mux := http.NewServeMux()
	mux.Handle("/hooks/", hooks)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := []byte(`{"id": 42, "status": "failed"}`)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/deploy", bytes.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var accepted struct {
		Session   string `json:"session"`
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(res.Body).Decode(&accepted)
	fmt.Println(res.StatusCode, accepted.Session, accepted.RequestID)
	// Output: 202 deploys webhook:deploy:sha256-4d68c054405eb9968a77ba6313be4cb3
}
