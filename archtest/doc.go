// Package archtest holds the architecture tests that span packages: the
// rules of the layering that no single package can check about itself.
// It has no code of its own; its tests run go list over the module.
//
// Entry points (cmd/dsh, serve, acp, cluster) hold sessions, never agents:
// they may import services/sessions, but not services/agents,
// services/agentloop or services/agentcontroller. The packages that still
// do are listed, with why, in an allow-list that can only shrink: an entry
// no longer needed fails the test too, so it is removed when its package
// is ported.
package archtest
