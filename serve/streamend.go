package serve

import (
	"encoding/json"

	"github.com/dsh-go/dsh/errs"
)

// streamEnd is the data of the last message of a stream whose session
// closed on this server: a client closed it, or — in a cluster — this
// server lost the session to another host (its lease ran out while it
// stalled). A shutdown ends streams without it. Without it a client could not tell the
// end from a dropped connection; with it, it knows to reconnect, with its
// Last-Event-ID, to any server (after resuming the session, on one host).
type streamEnd struct {
	Kind      string `json:"kind"`
	Session   string `json:"session"`
	LastSeq   int64  `json:"last_seq"`
	Reconnect bool   `json:"reconnect"`
}

// sendEnd sends the end message; the stream ends after it either way.
func (s *Server) sendEnd(out *sse, id string) {
	data, _ := json.Marshal(streamEnd{Kind: "end", Session: id, LastSeq: out.seq, Reconnect: true})
	_ = out.sendLast("end", data)
}

// streamDrop is the data of the last message of a stream whose client
// left more than the stream's buffer unread (a reader too slow for the
// session, or one that stopped). It names the id of the last event or
// notice the stream sent, which the client holds once it reads this:
// reconnecting with it as Last-Event-ID resumes with nothing lost or
// doubled.
type streamDrop struct {
	Kind      string    `json:"kind"`
	Session   string    `json:"session"`
	LastID    string    `json:"last_id"`
	LastSeq   int64     `json:"last_seq"`
	Reconnect bool      `json:"reconnect"`
	Code      errs.Code `json:"code"`
	Message   string    `json:"message"`
}
