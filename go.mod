module github.com/dsh-go/dsh

go 1.26

require (
	github.com/hashicorp/go-hclog v1.6.3
	go.uber.org/goleak v1.3.0
)

require (
	github.com/fatih/color v1.13.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	golang.org/x/sys v0.0.0-20220503163025-988cb79eb6c6 // indirect
)
