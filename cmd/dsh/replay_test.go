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

	"github.com/dsh-go/dsh/internal/natstest"
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

// TestReplayReportsExactlyWhatAConfigEditChanges: sessions recorded under
// a config that denies the clock are replayed under the same config (no
// changes, exit 0), under one whose rule allows it (exactly the clock's
// approvals, DENY→ALLOW, exit 6), and under one with a rate limit of one
// prompt a minute (exactly the second prompt of s1: its admission and its
// turn refused).
func TestReplayReportsExactlyWhatAConfigEditChanges(t *testing.T) {
	dir := t.TempDir()
	priv, _ := keyPair(t)
	recorded := recordedConfig(t, dir, priv, "deny", "")
	record(t, recorded)

	if out := runDsh(t, "", "--config", recorded, "replay", "s1", "s2"); out.code != 0 || strings.TrimSpace(out.stdout) != "session s1: no changes (4 decisions, 4 steps)\nsession s2: no changes (2 decisions, 2 steps)\nno changes" {
		t.Fatalf("replay under the recorded config: %+v", out)
	}

	allowed := recordedConfig(t, dir, priv, "allow", "")
	out := runDsh(t, "", "--config", allowed, "replay", "--all", "--json")
	if out.code != exitChanged {
		t.Fatalf("replay under a flipped rule: %+v", out)
	}
	var got struct {
		Changed  bool `json:"changed"`
		Sessions []struct {
			Session string `json:"session"`
			Changes []struct {
				Kind, Stage, CallID, Tool string
				Turn, Step                int
				Before, After             struct{ Verdict, Policy string }
			} `json:"changes"`
			Turns []any `json:"turns"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, out.stdout)
	}
	var lines []string
	for _, s := range got.Sessions {
		if len(s.Turns) != 0 {
			t.Fatalf("session %s: turns changed under a flipped approval rule: %v", s.Session, s.Turns)
		}
		for _, c := range s.Changes {
			lines = append(lines, fmt.Sprintf("%s %s %s turn %d step %d %s %s->%s", s.Session, c.Kind, c.Stage, c.Turn, c.Step, c.Tool, c.Before.Verdict, c.After.Verdict))
		}
	}
	want := []string{
		"s1 relaxed approval turn 1 step 1 clock deny->allow",
		"s1 relaxed approval turn 2 step 1 clock deny->allow",
		"s2 relaxed approval turn 1 step 1 clock deny->allow",
	}
	if !got.Changed || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes\n got %s\nwant %s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	limited := recordedConfig(t, dir, priv, "deny", "  - use: admission.rate-limit\n    config: {per_minute: 1}\n")
	out = runDsh(t, "", "--config", limited, "replay", "s1")
	if out.code != exitChanged {
		t.Fatalf("replay under a rate limit: %+v", out)
	}
	text := strings.Split(strings.TrimSpace(out.stdout), "\n")
	if len(text) != 3 || !strings.HasPrefix(text[0], "session s1: 1 decisions changed, 1 turns changed") ||
		!strings.Contains(text[1], "ADMIT→REFUSE") || !strings.Contains(text[1], "turn 2") || !strings.Contains(text[1], "admission/rate-limited") ||
		!strings.Contains(text[2], "turn 2 (request") || !strings.Contains(text[2], "completed -> refused") {
		t.Fatalf("replay under a rate limit:\n%s", out.stdout)
	}
}

// TestReplayReadsAClustersStore: sessions a cluster keeps in JetStream
// replay like a folder's.
func TestReplayReadsAClustersStore(t *testing.T) {
	url := natstest.Single(t).ClientURL()
	file := clusterConfig(t, url, "host-a")
	for _, p := range []string{"one", "two"} {
		if out := runDsh(t, "", "--config", file, "run", "--session", "c1", "-p", p); out.code != 0 {
			t.Fatalf("dsh run: %+v", out)
		}
	}
	if out := runDsh(t, "", "--config", file, "replay", "c1"); out.code != 0 || !strings.Contains(out.stdout, "session c1: no changes (2 decisions, 2 steps)") {
		t.Fatalf("replay from JetStream: %+v", out)
	}
	// The replayed session lived in memory: the cluster's store holds the
	// recorded one only.
	if out := runDsh(t, "", "--config", file, "sessions", "list", "--json"); out.code != 0 || strings.Contains(out.stdout, "replay-") || !strings.Contains(out.stdout, `"id":"c1"`) {
		t.Fatalf("the store after a replay: %+v", out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	limited := filepath.Join(t.TempDir(), "limited.yaml")
	text := strings.Replace(string(raw), "plugins:\n", "plugins:\n  - use: admission.rate-limit\n    config: {per_minute: 1}\n", 1)
	if err := os.WriteFile(limited, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runDsh(t, "", "--config", limited, "replay", "c1"); out.code != exitChanged || !strings.Contains(out.stdout, "turn 2 (request") {
		t.Fatalf("replay from JetStream under a rate limit: %+v", out)
	}
}

// TestReplayReadsAFolderOrAnotherConfigsStore: --dir reads a folder of
// session.jsonl logs and --from another config's store, for a new config
// that stores nothing itself; the replay writes nothing to either.
func TestReplayReadsAFolderOrAnotherConfigsStore(t *testing.T) {
	dir := t.TempDir()
	priv, _ := keyPair(t)
	recorded := recordedConfig(t, dir, priv, "deny", "")
	record(t, recorded)
	raw, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", dir)
	if !strings.Contains(string(raw), store) {
		t.Fatalf("the config has no store entry %q", store)
	}
	bare := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(bare, []byte(strings.Replace(strings.Replace(string(raw), store, "", 1), "decision: deny", "decision: allow", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range [][]string{{"--dir", dir}, {"--from", recorded}} {
		out := runDsh(t, "", append([]string{"--config", bare, "replay", "s1"}, how...)...)
		if out.code != exitChanged || !strings.Contains(out.stdout, "session s1: 2 decisions changed, 0 turns changed") {
			t.Fatalf("replay %v: %+v", how, out)
		}
	}
	if out := runDsh(t, "", "--config", bare, "replay", "s1"); out.code != exitUsage {
		t.Fatalf("replay with no store to read: %+v", out)
	}
	if out := runDsh(t, "", "--config", recorded, "replay", "nope"); out.code != exitNotFound {
		t.Fatalf("replay of a session never stored: %+v", out)
	}
	after, err := os.ReadFile(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("the replay wrote to the recorded log")
	}
}

// TestReplayReportsATurnStoppedByALimit: an agent limited to one step a
// turn stops each recorded two-step turn after its first step; the
// approvals of that step do not change, the turns do.
func TestReplayReportsATurnStoppedByALimit(t *testing.T) {
	dir := t.TempDir()
	priv, _ := keyPair(t)
	recorded := recordedConfig(t, dir, priv, "deny", "")
	record(t, recorded)
	raw, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	limited := filepath.Join(t.TempDir(), "limited.yaml")
	if err := os.WriteFile(limited, []byte(strings.Replace(string(raw), "    provider: scripted\n", "    provider: scripted\n    max_steps: 1\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runDsh(t, "", "--config", limited, "replay", "s2", "--json")
	if out.code != exitChanged {
		t.Fatalf("replay under max_steps 1: %+v", out)
	}
	var got struct {
		Sessions []struct {
			Changes []any `json:"changes"`
			Turns   []struct {
				Turn               int
				Before, After, Why string
			} `json:"turns"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &got); err != nil {
		t.Fatal(err)
	}
	s := got.Sessions[0]
	if len(s.Changes) != 0 || len(s.Turns) != 1 || s.Turns[0].Turn != 1 || s.Turns[0].Before != "completed" ||
		s.Turns[0].After != "error" || !strings.Contains(s.Turns[0].Why, "AGENT_TOO_MANY_STEPS") {
		t.Fatalf("replay under max_steps 1: %s", out.stdout)
	}
}
