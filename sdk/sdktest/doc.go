// Package sdktest drives a dsh plugin through the real protocol without
// dsh: it plays the host's side of sdk/proto/pluginv1 over gRPC, so a
// plugin's own tests can call its tools, send it an admission and read the
// decision, or hand it a notification, and see exactly what dsh would.
//
// Start serves a *sdk.Plugin in the test's own process, on a loopback TCP
// port with a real gRPC server; it is fast and lets a test share state
// with the plugin's handlers. Exec starts a built plugin binary (or any
// program, a Python script through its interpreter included) as a child
// process with go-plugin's handshake and AutoMTLS, as dsh does; Build
// compiles a Go package for it. Both describe and configure the plugin
// first, as dsh does, and return a Host. A Host sends its calls on the
// plugin's Mux stream when the plugin accepts it, as dsh does; WithRPCs
// sends each as an RPC of its own, dsh's path for plugins without it.
//
//	func TestWordCount(t *testing.T) {
//		h := sdktest.Start(t, newPlugin())
//		res, err := h.CallTool(t.Context(), "word_count", map[string]any{"text": "a b"})
//		if err != nil || res.Content != "the text: 0 lines, 2 words, 3 bytes" {
//			t.Fatal(res, err)
//		}
//	}
//
// What sdktest does not do is what dsh adds around a plugin: it does not
// validate tool arguments against the declared schema, run approval
// policies, restart a crashed plugin or bound calls by the entry's
// timeout; the rest of a waterfall's chain is whatever function the test
// passes as "rest".
package sdktest
