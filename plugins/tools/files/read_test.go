package files

import (
	"fmt"
	"strings"
	"testing"
)

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadNumbersLinesLikeCatN(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": "one\r\n\ttwo\nthree"})
	got := ok(t, Config{}, "read", ws, m{"path": "a.txt"})
	if want := "     1\tone\n     2\t\ttwo\n     3\tthree\n"; got != want {
		t.Fatalf("read = %q, want %q", got, want)
	}
}

func TestReadRangeAndTheNoteSayingHowToGoOn(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": numbered(1, 50)})
	got := ok(t, Config{}, "read", ws, m{"path": "a.txt", "offset": 10, "limit": 3})
	want := "    10\tline 10\n    11\tline 11\n    12\tline 12\n[showing lines 10-12; the file goes on: call read with offset=13 to continue]\n"
	if got != want {
		t.Fatalf("read = %q, want %q", got, want)
	}
	// The end of the file carries no note.
	if got := ok(t, Config{}, "read", ws, m{"path": "a.txt", "offset": 49}); got != "    49\tline 49\n    50\tline 50\n" {
		t.Fatalf("tail = %q", got)
	}
	refused(t, Config{}, "read", ws, m{"path": "a.txt", "offset": 51}, "offset 51 is past the end", "50 lines")
	refused(t, Config{}, "read", ws, m{"path": "a.txt", "offset": -1}, "positive")
}

func TestReadCapsLinesAndBytes(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": numbered(1, 100), "wide.txt": strings.Repeat(strings.Repeat("x", 99)+"\n", 10)})
	got := ok(t, Config{ReadMaxLines: 5}, "read", ws, m{"path": "a.txt", "limit": 50})
	if !strings.HasSuffix(got, "[showing lines 1-5; the file goes on: call read with offset=6 to continue]\n") || strings.Count(got, "\n") != 6 {
		t.Fatalf("line cap: %q", got)
	}
	got = ok(t, Config{ReadMaxBytes: 250}, "read", ws, m{"path": "wide.txt"})
	if strings.Count(got, strings.Repeat("x", 99)) != 2 || !strings.HasSuffix(got, "[showing lines 1-2: output cut at 250 bytes; call read with offset=3 to continue]\n") {
		t.Fatalf("byte cap: %q", got)
	}
}

func TestReadCutsLongLinesOnARuneBoundary(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	ws := tree(t, map[string]string{"a.txt": long + "\nnext\n"})
	got := ok(t, Config{MaxLineBytes: 15}, "read", ws, m{"path": "a.txt"})
	want := "     1\t" + strings.Repeat("é", 7) + "… [line 1 is longer than 15 bytes and was cut]\n     2\tnext\n"
	if got != want {
		t.Fatalf("read = %q, want %q", got, want)
	}
}

// TestLinesBeyondTheReadBuffer: a line longer than the reader's buffer is
// still one line, cut, and the next line keeps its number.
func TestLinesBeyondTheReadBuffer(t *testing.T) {
	long := strings.Repeat("a", 200<<10)
	var got []string
	err := lines(strings.NewReader(long+"\nb\n"), 10, func(n int, text []byte, cut bool) bool {
		got = append(got, fmt.Sprintf("%d:%s:%v", n, text, cut))
		return true
	})
	if err != nil || strings.Join(got, " ") != "1:aaaaaaaaaa:true 2:b:false" {
		t.Fatalf("lines = %v, %v", got, err)
	}
}

func TestReadRefusesBinaryFiles(t *testing.T) {
	ws := tree(t, map[string]string{
		"nul.bin":    "PK\x03\x04\x00\x00rest",
		"latin1.txt": "caf\xe9\n",
		// A rune cut by the 1 KiB sniff window is still text.
		"edge.txt": strings.Repeat("a", sniffBytes-1) + "é\n",
	})
	refused(t, Config{}, "read", ws, m{"path": "nul.bin"}, "binary", "NUL byte at offset 4")
	refused(t, Config{}, "read", ws, m{"path": "latin1.txt"}, "binary", "not UTF-8 at offset 3")
	if got := ok(t, Config{}, "read", ws, m{"path": "edge.txt"}); !strings.Contains(got, "aé") {
		t.Fatalf("edge: %q", got)
	}
}

func TestReadExplainsOtherFailures(t *testing.T) {
	ws := tree(t, map[string]string{"d/": "", "empty.txt": ""})
	refused(t, Config{}, "read", ws, m{"path": "d"}, "is a directory", "list")
	refused(t, Config{}, "read", ws, m{"path": "nope.txt"}, `"nope.txt" does not exist`)
	refused(t, Config{}, "read", ws, m{}, "path is empty")
	refused(t, Config{}, "read", ws, m{"path": "x", "bogus": 1}, "not valid", "bogus")
	if got := ok(t, Config{}, "read", ws, m{"path": "empty.txt"}); !strings.Contains(got, "is empty") {
		t.Fatal(got)
	}
}

// TestArgumentsAreNotTrusted: whatever arrives, a tool answers with a
// result, never a panic or a Go error.
func TestArgumentsAreNotTrusted(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": "a\n"})
	for _, name := range Names {
		for _, raw := range []any{nil, "a string", 42, []int{1}, m{"path": 3}, m{"pattern": nil, "old": false}} {
			run(t, Config{}, name, ws, raw)
		}
	}
}
