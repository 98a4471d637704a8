package main

import (
	"strings"
	"testing"
)

func TestExampleRuns(t *testing.T) {
	var out strings.Builder
	if err := run(&out, []string{"hello there", "HELLO THERE", "OK"}); err != nil {
		t.Fatal(err)
	}
	want := `"hello there" answered: You said: hello there
"HELLO THERE" refused (example/shouting): Please do not shout.
"OK" answered: You said: OK
`
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
