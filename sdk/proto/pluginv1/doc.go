// Package pluginv1 is the generated Go code of plugin.proto, version 1 of
// the dsh plugin protocol. The .proto beside it is the contract for plugins
// in any language; regenerate with
//
//	protoc --go_out=. --go_opt=paths=source_relative \
//	  --go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
package pluginv1
