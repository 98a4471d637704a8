// Package archtest holds the architecture tests that span packages: the
// rules of the layering that no single package can check about itself.
// It has no code of its own; its tests run go list over the module and
// look at the session layer's exported methods by reflection.
//
// Entry points (cmd/dsh, serve, acp, cluster) hold sessions, never agents:
// they may import services/sessions, but not services/agents,
// services/agentloop or services/agentcontroller, and no entry point is
// let off (the allow-list is empty and must stay so). The session layer,
// in turn, hands out no agent or scope: no exported method of a Session,
// the Controller or the Service returns one.
package archtest
