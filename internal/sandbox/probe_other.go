//go:build !linux

package sandbox

func kernelABI() (int, string) { return 0, "Landlock is a Linux feature" }

func probeNamespaces(st *Status) {
	st.NSReason = "namespaces are a Linux feature"
	st.IdmapReason = st.NSReason
}
