package config

import "github.com/dsh-go/dsh/plugin"

// nearest returns the registered id closest to id, if one is close.
func nearest(id string) string {
	best, bestDist := "", len(id)/2+2
	for _, info := range plugin.List() {
		if d := distance(id, info.ID); d < bestDist {
			best, bestDist = info.ID, d
		}
	}
	return best
}

// distance is the Levenshtein distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
