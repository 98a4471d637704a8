package faults

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// outcome is one row of the report: what a fault did to the prompts (or
// runs) it hit.
type outcome struct {
	fault   string
	tries   int
	kept    int
	refused map[string]int // by reason
	lost    int
	doubled int
	// recover is the time from the fault to the first success after it;
	// the median and the worst are reported.
	recover []time.Duration
}

var (
	tableMu sync.Mutex
	table   []*outcome
)

// record adds a row to the report printed when the suite ends.
func record(o *outcome) {
	tableMu.Lock()
	defer tableMu.Unlock()
	table = append(table, o)
}

func (o *outcome) refuse(reason string) {
	if o.refused == nil {
		o.refused = map[string]int{}
	}
	o.refused[reason]++
}

func printTable(w io.Writer) {
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) == 0 {
		return
	}
	fmt.Fprintf(w, "\nfault suite (DSH_FAULTS_N=%d)\n", scale())
	fmt.Fprintln(w, "| fault | tries | kept | refused (reason) | lost | doubled | time to recover (median / max) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, o := range table {
		var refused []string
		for _, r := range slices.Sorted(maps.Keys(o.refused)) {
			refused = append(refused, fmt.Sprintf("%d %s", o.refused[r], r))
		}
		ref := "0"
		if len(refused) > 0 {
			ref = strings.Join(refused, ", ")
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %s |\n", o.fault, o.tries, o.kept, ref, o.lost, o.doubled, recoverText(o.recover))
	}
}

func recoverText(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("%v / %v", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
