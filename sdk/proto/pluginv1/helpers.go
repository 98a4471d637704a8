package pluginv1

// IsUnattended reports whether nobody waits behind the message (a
// schedule, a webhook): never hold such a message waiting for a person.
func (a *Admission) IsUnattended() bool {
	s := a.GetSource()
	return s.GetUnattended() || s.GetKind() == "schedule" || s.GetKind() == "webhook"
}
