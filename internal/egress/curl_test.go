package egress_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/egress"
)

// curl runs curl with only the proxy variables a sandboxed command gets
// and returns its stdout, stderr and exit code. curl reads the lower-case
// http_proxy only (the upper-case one is ignored for http:// on purpose)
// and either case of HTTPS_PROXY.
func curl(t *testing.T, proxy string, args ...string) (string, string, int) {
	t.Helper()
	bin, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is not installed (apt-get install -y curl): %v", err)
	}
	cmd := exec.Command(bin, append([]string{"-sS", "--max-time", "10"}, args...)...)
	cmd.Env = []string{"http_proxy=" + proxy, "HTTPS_PROXY=" + proxy, "PATH=/usr/bin:/bin"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCurlThroughProxy(t *testing.T) {
	up := upstream(t)
	tlsUp, _ := tlsUpstream(t)
	cert := tlsUp.TLS.Certificates[0]
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644); err != nil {
		t.Fatal(err)
	}
	dns := newDNS("allowed.test", "127.0.0.1", "denied.test", "127.0.0.1")
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), dns, egress.Options{Agent: "main"})
	proxy := "http://" + h.addr
	p, tp := port(t, up.Listener.Addr().String()), port(t, tlsUp.Listener.Addr().String())

	if out, errOut, code := curl(t, proxy, "http://allowed.test:"+p+"/plain"); code != 0 || out != "hello from allowed.test:"+p+" /plain" {
		t.Errorf("http: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := curl(t, proxy, "--cacert", ca, "https://allowed.test:"+tp+"/tls"); code != 0 || out != "secure hello /tls" {
		t.Errorf("https: exit %d, %q %q", code, out, errOut)
	}
	// A refused http:// request shows the reason in the body curl prints.
	out, _, code := curl(t, proxy, "http://denied.test:"+p+"/")
	if code != 0 || !strings.Contains(out, "dsh egress policy: denied.test:"+p+" is not in sandbox.network.allow") {
		t.Errorf("denied http: exit %d, %q", code, out)
	}
	// A refused https:// one fails the tunnel; with -v the status line
	// carrying the reason is in curl's output.
	_, errOut, code := curl(t, proxy, "-v", "https://denied.test:"+tp+"/")
	if code == 0 || !strings.Contains(errOut, "403 Forbidden (dsh egress policy: denied.test:"+tp+" is not in sandbox.network.allow)") {
		t.Errorf("denied https: exit %d, %q", code, errOut)
	}
	if r := h.recorded(); len(r) != 2 || r[0].Agent != "main" {
		t.Errorf("refusals: %+v", r)
	}
}
