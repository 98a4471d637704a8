// Command dsh runs the agents described in a config file.
//
// This first cut only builds the context tree and reports what is active;
// configuration, agents and the interactive loop arrive with the host.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/hashicorp/go-hclog"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "run" {
		fmt.Fprintln(stderr, "usage: dsh run")
		return 2
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Name: "dsh", Output: stderr})))
	defer root.Dispose()
	printTree(stdout, root.Fiber(), 0)
	return 0
}

func printTree(w io.Writer, f *dshctx.Fiber, depth int) {
	fmt.Fprintf(w, "%s%s (%s)\n", strings.Repeat("  ", depth), f.Name(), f.State())
	for _, c := range f.Children() {
		printTree(w, c, depth+1)
	}
}
