// Package pluginv1 is the generated Go code of plugin.proto and
// events.proto, version 2 of the dsh plugin protocol (the Go package keeps
// its v1 path; the handshake carries the version). The .proto files beside
// it are the contract for plugins in any language; after changing them,
// regenerate the Go and Python code with
//
//	sdk/proto/pluginv1/generate.sh
//
// (protoc from Debian's protobuf-compiler, and protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.6.2 from go install). CI regenerates and fails when
// the committed code differs.
package pluginv1
