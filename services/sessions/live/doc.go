// Package live serves one agent's session to attached clients: the live
// event contract, retained notices and approval fan-out.
//
// # The live event contract
//
// Durable events (the session log) carry their sequence numbers, and go
// out only once durable: when the session/flush checkpoint that stored
// them succeeded (session/durable), never at their append, so a client
// never holds an event under a seq that a crash gives to another. Stream
// chunks are transient: they are never recorded in the log and carry the id
// of the message they build and their index in it (0, 1, 2, ...). A client
// attaches — or re-attaches after a drop — with the last sequence number it
// holds (AttachOptions.AfterSeq; 0 for everything) and receives, in order:
//
//  1. every durable event with Seq > AfterSeq (KindEvent);
//  2. the retained notices with ID > AfterNotice (KindNotice);
//  3. a snapshot of the message being streamed, if one is (KindSnapshot):
//     the message assembled from chunks 0..Next-1;
//  4. the pending approval question, for a client that answers approvals
//     (KindQuestion);
//  5. then, live, every following chunk (Index >= Next), durable event,
//     notice and question, in the order the agent produced them.
//
// No event is missing and none comes twice: the Hub takes the backlog, the
// snapshot and the client's subscription under the one lock its listeners
// take, so an event made durable while a client attaches lands either in the
// backlog or in the live part, never in both or neither. A streamed message
// ends when its assistant/message event is durable (or the step or turn
// ends without one, when the stream was aborted): from then on the log holds
// it, and a client drops what it assembled.
//
// # Slow clients
//
// Delivering to a client never blocks the agent: each client has a bounded
// queue (Options.Buffer). A client whose queue is full is dropped with
// LIVE_CLIENT_OVERFLOW; Client.LastSeq says where to re-attach, and the
// re-attach loses nothing (the backlog and the snapshot cover it).
//
// # Approvals
//
// While at least one client that answers approvals (AttachOptions.Approvals)
// is attached, the Hub is the agent's one answerer in services/approval: it
// attaches with the first such client and detaches with the last. Each
// request goes to every approving client; the first Answer wins and the
// others get a KindSettled update naming who answered. A client that leaves
// mid-question leaves it with the others; when the last one leaves, the
// approval service cancels the question and the call fails closed. With no
// approving client attached nobody is attached to the service, which fails
// closed with APPROVAL_NO_ANSWERER — an unattended source never waits. When
// the asking call is cancelled, every client gets KindSettled with
// Withdrawn set.
//
// # Tool starts
//
// When a tool call passes approval and tools/execute takes it, attached
// clients get a KindToolStart update naming the call (an editor marks it
// in progress). Like a chunk it is transient: a client attaching later
// learns of the call from its durable tool/call and tool/result events.
//
// # Notices
//
// Hub.Notice publishes a session-visible outcome that is not a log event,
// such as session/prompt-rejected with the request id and the reason. It
// goes to every attached client and the Hub keeps the last Options.Notices
// of them, so a client that re-attaches learns it after its durable backlog.
package live
