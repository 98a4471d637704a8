// Package attachments is the attachments service: the bytes of the images
// and files that messages carry, kept once by content (sha256) beside the
// sessions, so a session log names them by reference and never holds them.
//
// # Storing and releasing
//
// A delivery with parts (a prompt with a screenshot, say) calls Admit: it
// checks the size limits, sniffs each part's media type from its bytes,
// stores the bytes and records that the session references them, and
// returns the parts with Ref set and Data cleared, ready for the log, plus
// a release. The agent controller calls that release when the message does
// not enter the inbox (refused, cancelled, the agent gone, insertion
// failed): it removes the session's reference this delivery added and the
// blob when nothing else references it.
//
// # References
//
// Who references a blob is kept, on disk, as one empty marker file per
// referencing session: refs/<hex>/<session id, path-escaped>. Blobs live in
// blobs/<hex>. A blob with no marker is garbage. The markers are written
// (and synced) before the message that needs them can reach the session
// log, so a crash never leaves a log pointing at a collected blob; it can
// only leave a marker the log does not back (dsh stopped between storing
// and the log's flush). Collect, run when the store opens, reads the logs
// of the sessions with such unverified markers once, drops the markers
// their logs do not back, marks the others verified (the marker file then
// holds "ok") and removes the blobs left without markers. A session
// another process holds is skipped: its writer may be mid-delivery. So is
// the marker, younger than an hour, of a session with no log at all: a new
// session's log appears with its first prompt, which may still be waiting
// in another process's admission. Given
// the list of sessions that exist, it also drops the verified markers of
// sessions whose logs were removed behind dsh's back.
//
// This is cheaper than scanning every session log at start (only sessions
// with unverified markers are read, each once in its life) and than a
// single index file (no rewrite, no lost update between processes). Within
// one process, a hold count per (session, blob) keeps a delivery's release
// from dropping a reference another live message of the same session
// took meanwhile (a tool's image, a second prompt with the same bytes).
// Across processes, writes and removals of one blob's markers are
// serialised by a flock on the store's lock file.
//
// # Backends
//
// The markers and blobs live in a Backend: a directory (Open), memory
// (NewMemory), or, for hosts that share their sessions in JetStream, the
// object store and buckets of plugins/session/nats (NewStore). Each keeps
// the layout above in its own terms; the Store's rules — marker before
// blob, removal under the backend's lock, collection — are the same over
// all of them.
//
// # Media types
//
// The declared media type is never trusted alone: the bytes are sniffed
// (net/http.DetectContentType, plus WebP, SVG and text formats it names
// text/plain). A part declared as an image whose bytes are not an image
// is refused (ATTACHMENT_MEDIA_MISMATCH): a model sent text as an image
// fails in an unclear way, and a client that mislabels is better told.
// Otherwise the sniffed type wins, except that a declared text subtype
// (text/markdown, application/json) is kept for bytes that sniff as
// text, since sniffing cannot tell text formats apart.
package attachments
