package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordedConfig is a config that records sessions in dir, signed with
// the key in keyFile: a scripted model that calls the clock and then
// answers, a tools.permission rule on the clock, and extra root entries.
func recordedConfig(t *testing.T, dir, keyFile, clock, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "checking"
          tool_calls: [{name: clock, arguments: '{"timezone": "UTC"}'}]
        - text: "done"
  - use: tools.clock
  - use: session.jsonl
    config: {dir: %q}
  - use: session.sign
    config: {key_file: %q}
  - id: perm
    use: tools.permission
    config:
      rules:
        - {tool: clock, decision: %s, reason: "clock rule"}
%sagents:
  - id: main
    provider: scripted
log: {level: warn}
`, dir, keyFile, clock, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// keyPair writes a fresh ed25519 key as PEM files, private and public.
func keyPair(t *testing.T) (privFile, pubFile string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	px, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	privFile, pubFile = filepath.Join(dir, "key.pem"), filepath.Join(dir, "key.pub")
	if err := os.WriteFile(privFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: px}), 0o644); err != nil {
		t.Fatal(err)
	}
	return privFile, pubFile
}

// record runs two turns in session s1 and one in s2 under cfg.
func record(t *testing.T, cfg string) {
	t.Helper()
	for _, run := range [][]string{{"s1", "what time is it"}, {"s1", "and now"}, {"s2", "hello"}} {
		if out := runDsh(t, "", "--config", cfg, "run", "--session", run[0], "-p", run[1]); out.code != 0 {
			t.Fatalf("dsh run %v: %+v", run, out)
		}
	}
}

// logLines reads a session.jsonl log as raw JSON objects, one a line.
func logLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func writeLines(t *testing.T, path string, lines []map[string]any) {
	t.Helper()
	var b strings.Builder
	for _, m := range lines {
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsAreSignedAndVerifyFindsTampering: dsh run records every
// admission and approval decision, signed; dsh sessions verify accepts
// the log, and names the seq of a tampered record, of the record after a
// removed one, and of the first record under a wrong key.
func TestRecordsAreSignedAndVerifyFindsTampering(t *testing.T) {
	dir := t.TempDir()
	priv, pub := keyPair(t)
	cfg := recordedConfig(t, dir, priv, "deny", "")
	record(t, cfg)

	lines := logLines(t, filepath.Join(dir, "s1.jsonl"))
	var decisions []map[string]any
	var seqs []int
	for _, m := range lines {
		if m["type"] == "decision" {
			decisions = append(decisions, m["decision"].(map[string]any))
			seqs = append(seqs, int(m["seq"].(float64)))
		}
	}
	// Per turn: the prompt's admission, the clock call's approval.
	var got []string
	for _, d := range decisions {
		got = append(got, fmt.Sprintf("%v:%v:%v", d["stage"], d["verdict"], d["policy"]))
		if d["sig"] == "" || d["sig"] == nil || !strings.HasPrefix(d["inputs"].(string), "sha256:") {
			t.Fatalf("record not signed or without inputs digest: %v", d)
		}
	}
	want := "admission:admit:<nil> approval:deny:tools.permission:rules[0] admission:admit:<nil> approval:deny:tools.permission:rules[0]"
	if strings.Join(got, " ") != want {
		t.Fatalf("records\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	if out := runDsh(t, "", "--config", cfg, "sessions", "verify", "s1", "s2", "--key", pub); out.code != 0 || !strings.Contains(out.stdout, "s1: ok, 4 decision records, all signed") {
		t.Fatalf("verify of an untouched log: %+v", out)
	}

	// A wrong key fails at the first record.
	_, other := keyPair(t)
	if out := runDsh(t, "", "--config", cfg, "sessions", "verify", "s1", "--key", other); out.code != exitError || !strings.Contains(out.stdout, fmt.Sprintf("FAILED at seq %d", seqs[0])) {
		t.Fatalf("verify under a wrong key: %+v", out)
	}

	path := filepath.Join(dir, "s1.jsonl")
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A record changed: deny made allow.
	tampered := logLines(t, path)
	for _, m := range tampered {
		if int(m["seq"].(float64)) == seqs[1] {
			m["decision"].(map[string]any)["verdict"] = "allow"
		}
	}
	writeLines(t, path, tampered)
	if out := runDsh(t, "", "--config", cfg, "sessions", "verify", "s1", "--key", pub); out.code != exitError || !strings.Contains(out.stdout, fmt.Sprintf("FAILED at seq %d", seqs[1])) {
		t.Fatalf("verify of a tampered record: %+v", out)
	}

	// A record removed, the seqs after it closed up so the log still
	// loads: the next record no longer chains.
	if err := os.WriteFile(path, pristine, 0o644); err != nil {
		t.Fatal(err)
	}
	var removed []map[string]any
	for _, m := range logLines(t, path) {
		seq := int(m["seq"].(float64))
		if seq == seqs[1] {
			continue
		}
		if seq > seqs[1] {
			m["seq"] = seq - 1
		}
		removed = append(removed, m)
	}
	writeLines(t, path, removed)
	if out := runDsh(t, "", "--config", cfg, "sessions", "verify", "s1"); out.code != exitError || !strings.Contains(out.stdout, fmt.Sprintf("FAILED at seq %d", seqs[2]-1)) || !strings.Contains(out.stdout, "removed") {
		t.Fatalf("verify after a removed record: %+v", out)
	}
}
