package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/coder/acp-go-sdk"
)

// The SDK logs and drops a line that is not JSON, and never answers a
// message that is neither request nor response; JSON-RPC wants an error
// for both. It also hides a request's id from the handler, which dsh needs
// as the prompt's request id (a retried request is then delivered once).
// The filter sits between the client and the SDK: it answers what the SDK
// would drop and hands the id of each session/prompt over in _meta.

// metaRequestID is the _meta key the filter stores a prompt's JSON-RPC id
// under.
const metaRequestID = "dsh.dev/jsonrpcId"

// maxLine bounds one message; the SDK's own scanner stops at 10 MiB.
const maxLine = 10 << 20

// lockedWriter serializes whole-line writes of the SDK and the filter.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// filter copies in to sdk line by line until in ends, answering malformed
// messages on out itself; it closes sdk when done.
func filter(in io.Reader, sdk *io.PipeWriter, out io.Writer, log *slog.Logger) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		fixed, reply := vet(line)
		if fixed == nil && reply == nil {
			// The spec has a receiver ignore a notification it does not
			// know; the SDK would log each at ERROR, which tells an
			// operator something is broken when nothing is.
			log.Debug("an unknown notification is ignored", "method", methodOf(line))
			continue
		}
		if reply != nil {
			_, _ = out.Write(reply)
			continue
		}
		if _, err := sdk.Write(append(fixed, '\n')); err != nil {
			break
		}
	}
	if err := sc.Err(); err != nil {
		// A line past maxLine cannot be resynchronized: say why and stop.
		_, _ = out.Write(rpcError(nil, -32700, "Parse error", "a message is longer than 10 MiB; dsh acp stops reading"))
		_ = sdk.CloseWithError(err)
		return
	}
	_ = sdk.Close()
}

// vet returns the line to pass on, or the reply that answers it instead;
// neither for a notification to ignore.
func vet(line []byte) ([]byte, []byte) {
	if line[0] != '{' {
		if json.Valid(line) {
			return nil, rpcError(nil, -32600, "Invalid request", "a message must be one JSON-RPC object per line (batches are not supported)")
		}
		return nil, rpcError(nil, -32700, "Parse error", "the line is not JSON")
	}
	var e envelope
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, rpcError(nil, -32700, "Parse error", "the line is not a JSON object: "+err.Error())
	}
	hasID := len(e.ID) > 0 && !bytes.Equal(e.ID, []byte("null"))
	switch {
	case e.Method == "" && !hasID:
		return nil, rpcError(nil, -32600, "Invalid request", "the message has neither a method nor an id")
	case e.Method == "" && e.Result == nil && e.Error == nil:
		return nil, rpcError(e.ID, -32600, "Invalid request", "the message has an id but no method, result or error")
	case e.Method == "session/prompt" && hasID:
		return withRequestID(line, e), nil
	case e.Method != "" && !hasID && !knownNotification(e.Method):
		return nil, nil
	}
	return line, nil
}

// knownNotification says whether the SDK has a handler for a notification
// the client sends: session/cancel, the protocol's $/cancel_request, and
// extension notifications ("_…"), which the SDK ignores quietly itself
// when nobody handles them.
func knownNotification(method string) bool {
	return method == acp.AgentMethodSessionCancel || method == "$/cancel_request" || strings.HasPrefix(method, "_")
}

// methodOf is the method a line names, for the log.
func methodOf(line []byte) string {
	var e envelope
	_ = json.Unmarshal(line, &e)
	return e.Method
}

// withRequestID puts the request's id into params._meta; a line whose
// params are not an object is passed on for the SDK to refuse.
func withRequestID(line []byte, e envelope) []byte {
	var msg map[string]json.RawMessage
	var params map[string]any
	if json.Unmarshal(line, &msg) != nil || json.Unmarshal(e.Params, &params) != nil || params == nil {
		return line
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[metaRequestID] = string(e.ID)
	params["_meta"] = meta
	b, err := json.Marshal(params)
	if err != nil {
		return line
	}
	msg["params"] = b
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return out
}

func rpcError(id json.RawMessage, code int, message, detail string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": message, "data": map[string]any{"details": detail}},
	})
	return append(b, '\n')
}
