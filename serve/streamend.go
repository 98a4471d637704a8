package serve

import "encoding/json"

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
	_ = out.send("end", data, false)
}
