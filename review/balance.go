package review

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"harness/schemas"
	"harness/trials"
)

// Uncategorized names the category of cases without the metadata key.
const Uncategorized = "(uncategorized)"

// Category returns the category of case c under metadata key (a dotted key
// such as "a.b" reaches into nested objects when no key has the literal
// name), rendered as JavaScript's String() would, or Uncategorized.
func Category(c *schemas.PromptCase, key string) string {
	v, ok := c.Metadata[key]
	if !ok && strings.Contains(key, ".") {
		var cur any = c.Metadata
		ok = true
		for _, part := range strings.Split(key, ".") {
			m, isMap := cur.(map[string]any)
			if !isMap {
				ok = false
				break
			}
			if cur, ok = m[part]; !ok {
				break
			}
		}
		v = cur
	}
	if !ok {
		return Uncategorized
	}
	return jsString(v)
}

// Balance analyses how cases spread over the values of metadata key, as
// acp-harness's balance does: categories sorted by count (ties in order of
// first appearance), percentage = round(100·count/total), a category is
// underrepresented when its percentage is below threshold percent of an
// even share, and the same suggestions.
func Balance(cases []schemas.PromptCase, key string, threshold float64) schemas.BalanceAnalysis {
	a := schemas.BalanceAnalysis{TotalCases: len(cases), Key: key, Threshold: threshold,
		Categories: []schemas.CategoryDistribution{}, Underrepresented: []string{}, Suggestions: []string{}}
	index := map[string]int{}
	for i := range cases {
		name := Category(&cases[i], key)
		j, ok := index[name]
		if !ok {
			j = len(a.Categories)
			index[name] = j
			a.Categories = append(a.Categories, schemas.CategoryDistribution{Name: name})
		}
		a.Categories[j].Count++
	}
	for i := range a.Categories {
		a.Categories[i].Percentage = math.Round(100 * float64(a.Categories[i].Count) / float64(max(len(cases), 1)))
	}
	slices.SortStableFunc(a.Categories, func(x, y schemas.CategoryDistribution) int { return y.Count - x.Count })
	if len(a.Categories) > 0 {
		even := 100 / float64(len(a.Categories))
		for _, c := range a.Categories {
			if c.Percentage < even*threshold/100 {
				a.Underrepresented = append(a.Underrepresented, c.Name)
			}
		}
	}
	if len(a.Underrepresented) > 0 {
		a.Suggestions = append(a.Suggestions, "Consider adding more test cases for: "+strings.Join(a.Underrepresented, ", "))
	}
	for _, c := range a.Categories {
		if c.Percentage > 50 {
			a.Suggestions = append(a.Suggestions, fmt.Sprintf("Category '%s' has %g%% of cases - consider diversifying", c.Name, c.Percentage))
			break
		}
	}
	var tiny []string
	for _, c := range a.Categories {
		if c.Count < 3 {
			tiny = append(tiny, c.Name)
		}
	}
	if len(tiny) > 0 {
		a.Suggestions = append(a.Suggestions, "Categories with < 3 cases may not be reliable: "+strings.Join(tiny, ", "))
	}
	if len(cases) < 20 {
		a.Suggestions = append(a.Suggestions, fmt.Sprintf("Consider expanding test set (currently %d cases) for more statistical significance", len(cases)))
	}
	if len(a.Suggestions) == 0 {
		a.Suggestions = append(a.Suggestions, "Test set appears well-balanced")
	}
	return a
}

// AddResults puts the pass rates of a run into each category of a: trials
// pooled over the category's cases, with a Wilson 95% interval. Result
// cases that are not in the prompts are listed in UnmatchedResults.
func AddResults(a *schemas.BalanceAnalysis, cases []schemas.PromptCase, run *trials.Run) {
	a.Results = run.File
	catOf := map[string]string{}
	for i := range cases {
		catOf[cases[i].ID] = Category(&cases[i], a.Key)
	}
	res := map[string]*schemas.CategoryResults{}
	for _, c := range a.Categories {
		res[c.Name] = &schemas.CategoryResults{}
	}
	for _, cc := range run.Cases {
		name, ok := catOf[cc.ID]
		if !ok {
			a.UnmatchedResults = append(a.UnmatchedResults, cc.ID)
			continue
		}
		r := res[name]
		r.Cases++
		r.Trials += cc.Trials
		r.Graded += cc.N
		r.Passes += cc.C
		for class, v := range cc.Errors {
			if r.Errors == nil {
				r.Errors = map[string]int{}
			}
			r.Errors[class] += v
		}
	}
	for i := range a.Categories {
		r := res[a.Categories[i].Name]
		if r.Graded > 0 {
			rate := float64(r.Passes) / float64(r.Graded)
			lo, hi, _ := trials.Wilson(r.Passes, r.Graded, trials.Z95)
			r.PassRate, r.PassRateCI = &rate, &schemas.Interval{Low: lo, High: hi}
		}
		a.Categories[i].Results = r
	}
}

// WriteBalanceChart writes the distribution for people, as acp-harness
// prints it on stderr (one █ per 5%), plus pass rates when there are any.
func WriteBalanceChart(w io.Writer, a schemas.BalanceAnalysis) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Analyzed %d prompts by '%s' metadata\n\nCategory Distribution:\n", a.TotalCases, a.Key)
	for _, c := range a.Categories {
		fmt.Fprintf(&b, "  %s: %d (%g%%) %s", c.Name, c.Count, c.Percentage, strings.Repeat("█", int(math.Round(c.Percentage/5))))
		if r := c.Results; r != nil {
			if r.PassRate != nil {
				fmt.Fprintf(&b, "  pass %d/%d = %.3f [%.3f, %.3f]", r.Passes, r.Graded, *r.PassRate, r.PassRateCI.Low, r.PassRateCI.High)
			} else {
				b.WriteString("  pass n/a (no graded trial)")
			}
		}
		b.WriteString("\n")
	}
	if len(a.Underrepresented) > 0 {
		fmt.Fprintf(&b, "\nUnderrepresented: %s\n", strings.Join(a.Underrepresented, ", "))
	}
	if len(a.UnmatchedResults) > 0 {
		fmt.Fprintf(&b, "\nResults for cases not in the prompts (ignored): %s\n", strings.Join(a.UnmatchedResults, ", "))
	}
	b.WriteString("\nSuggestions:\n")
	for _, s := range a.Suggestions {
		fmt.Fprintf(&b, "  - %s\n", s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
