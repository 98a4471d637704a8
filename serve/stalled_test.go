package serve_test

import (
	"bufio"
	stdctx "context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// A stream whose client stopped reading (a laptop asleep) blocks its
// handler in a write once the socket buffers are full; Shutdown must not
// wait for it until the deadline and then fail.
func TestShutdownWithAStalledStream(t *testing.T) {
	big := strings.Repeat("stalled ", 384<<10) // 3 MiB an answer
	var replies []scripted.Reply
	for range 2 {
		replies = append(replies, scripted.Reply{Text: big})
	}
	e := newEnv(t, envOpts{replies: replies})
	id := e.open(nil)
	for i := range 2 {
		e.send(id, fmt.Sprintf("r%d", i), "talk")
		e.waitEvents(id, "a turn", turnsEnded(i+1))
	}

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/sessions/%s/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", id, e.ts.Listener.Addr(), e.token)
	// The client reads up to the stream's ready message, then no more,
	// while the stream has 6 MiB to send (more than the 4 MiB a socket buffers).
	var got []byte
	one := make([]byte, 1)
	for !strings.Contains(string(got), "event: ready") {
		if _, err := conn.Read(one); err != nil {
			t.Fatalf("reading the stream's start: %v (got %q)", err, got)
		}
		got = append(got, one[0])
	}

	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a stalled stream, %v after it began: %v", time.Since(start), err)
	}
}

// A stream the session's close ends finishes its response cleanly: the
// client reads to the end without an error.
func TestStreamEndsCleanlyOnClose(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.open(nil)
	req, _ := http.NewRequest("GET", e.ts.URL+"/v1/sessions/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: ready") {
			break
		}
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if _, err := io.ReadAll(rd); err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
}
