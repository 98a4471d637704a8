// Package egress decides which hosts a sandboxed command may reach and
// serves the one door it has to the outside: an HTTP/1.1 forward proxy.
//
// The bash sandbox runs a command in a network namespace whose only route
// out is a TCP listener that dsh serves; the command finds it through
// HTTP_PROXY and HTTPS_PROXY. Proxy answers on that listener: absolute-form
// requests (GET http://host/path) are forwarded and CONNECT host:port is
// tunnelled, each only when Policy lets the host through.
//
// The decision is taken on the name the client asked for and on every
// address that name resolves to, and the proxy then dials exactly those
// addresses, never the name again: a name that passes the check cannot be
// re-resolved (DNS rebinding) to an address the policy denies between the
// check and the connection. Names the policy does not allow are never
// resolved, so the proxy cannot be used to leak data through DNS lookups
// of made-up names.
//
// Refusals are answered with 403, a reason phrase and a body that say in
// plain words what was refused and by which config key, and are reported
// to Options.OnRefusal and the log.
package egress
