// Package suggest finds the known name a mistyped one was probably meant
// to be, for the "did you mean" of an error message.
package suggest

// Nearest returns the name of known nearest to name by edit distance, when
// it is at most two edits away and the edits are at most a third of
// name's length; "" when none is that near (or name is known). Ties go to
// the first in known.
func Nearest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if k == name {
			return ""
		}
		if d := Distance(name, k); d < bestDist && 3*d <= len(name) {
			best, bestDist = k, d
		}
	}
	return best
}

// Distance is the edit distance of a and b, in bytes: insertions,
// deletions, substitutions and swaps of two neighbours each count one
// (the optimal string alignment distance).
func Distance(a, b string) int {
	// rows[i%3] is the row of a[:i]: the current one and the two before.
	var rows [3][]int
	for r := range rows {
		rows[r] = make([]int, len(b)+1)
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur, prev, prev2 := rows[i%3], rows[(i-1)%3], rows[(i+1)%3]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
	}
	return rows[len(a)%3][len(b)]
}
