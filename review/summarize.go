package review

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"harness/schemas"
	"harness/trials"
)

// Summarize returns the compact view of one record.
func Summarize(rec *schemas.CaptureRecord) schemas.SummaryResult {
	s := schemas.SummaryResult{
		ID:         rec.ID,
		Input:      rec.Input.Text(),
		Output:     rec.Output,
		ToolCalls:  []string{},
		Duration:   schemas.RecordDuration(rec),
		Trial:      rec.Trial,
		Steps:      len(rec.Trajectory),
		StopReason: rec.StopReason,
		ToolErrors: rec.ToolErrors,
		Waited:     rec.Timing.Waited,
	}
	if len(rec.Input.List) > 1 {
		s.Turns = len(rec.Input.List)
	}
	for i := range rec.Trajectory {
		if st := &rec.Trajectory[i]; st.Type == schemas.StepToolCall {
			s.ToolCalls = append(s.ToolCalls, st.Name)
		}
	}
	if len(rec.ModelCalls) > 0 {
		m := schemas.SumModelCalls(rec.ModelCalls, 0)
		s.ModelCalls = &m
	}
	pass, excluded := trials.Outcome(rec)
	s.Excluded = excluded
	if excluded == "" {
		score := rec.Score.Score
		s.Pass, s.Score = &pass, &score
	}
	switch {
	case rec.Error != nil:
		s.Error = rec.Error.Message
	case rec.Score != nil && rec.Score.Error != nil:
		s.Error = rec.Score.Error.Message
	}
	return s
}

// Markdown limits, as acp-harness uses them.
const (
	previewChars    = 100 // thought and message previews
	planChars       = 80  // plan previews
	outputChars     = 200 // the output preview
	maxContentChars = 500 // tool content longer than this is cut
	headLines       = 8
	tailLines       = 4
)

// WriteMarkdown writes one record in acp-harness's summarize markdown, with
// harness's step ids (the step's stepId, else <id>-t<trial>-s<n>) and the
// steps acp-harness does not know (permission, fs, terminal...) listed too.
func WriteMarkdown(w io.Writer, rec *schemas.CaptureRecord) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Evaluation Record: %s\n\n", rec.ID)
	if rec.Trial > 0 {
		fmt.Fprintf(&b, "**Trial:** %d\n\n", rec.Trial)
	}
	fmt.Fprintf(&b, "**Input:** %s\n\n**Trajectory:**\n", rec.Input.Text())
	n := 0
	for i := range rec.Trajectory {
		st := &rec.Trajectory[i]
		line := stepLine(st)
		if line == "" {
			continue
		}
		n++
		id := st.StepID
		if id == "" {
			id = fmt.Sprintf("%s-t%d-s%d", rec.ID, rec.Trial, i+1)
		}
		fmt.Fprintf(&b, "%d. %s [→%s]\n", n, line, id)
		if st.Type == schemas.StepToolCall {
			writeToolPreview(&b, st)
		}
	}
	fmt.Fprintf(&b, "\n**Output:** %s\n\n", cut(rec.Output, outputChars))
	var meta []string
	for _, k := range slices.Sorted(maps.Keys(rec.Metadata)) {
		meta = append(meta, fmt.Sprintf("%s=%s", k, jsString(rec.Metadata[k])))
	}
	fmt.Fprintf(&b, "**Metadata:** %s\n", strings.Join(meta, ", "))
	fmt.Fprintf(&b, "**Tool Errors:** %t\n", rec.ToolErrors)
	if d, a := schemas.RecordDuration(rec), schemas.AgentDuration(rec); d != a {
		fmt.Fprintf(&b, "**Duration:** %dms (agent %dms)\n", d, a)
	} else {
		fmt.Fprintf(&b, "**Duration:** %dms\n", d)
	}
	if rec.Timing.Waited > 0 {
		fmt.Fprintf(&b, "**Waited:** %.1fs on the provider's failures\n", float64(rec.Timing.Waited)/1000)
	}
	if len(rec.ModelCalls) > 0 {
		fmt.Fprintf(&b, "**Model Calls:** %s\n", ModelCallsLine(schemas.SumModelCalls(rec.ModelCalls, 0)))
		if turns := schemas.ModelCallsByTurn(rec.ModelCalls); len(turns) > 1 {
			for _, t := range turns {
				fmt.Fprintf(&b, "- turn %d: %s\n", t.Turn, ModelCallsLine(t))
			}
		}
	}
	if rec.Error != nil {
		fmt.Fprintf(&b, "**Error:** %s: %s\n", rec.Error.Class, rec.Error.Message)
	}
	if rec.Score != nil {
		fmt.Fprintf(&b, "**Score:** %s (%s)\n", verdict(rec.Score), jsNumber(rec.Score.Score))
		if rec.Score.Reasoning != "" {
			fmt.Fprintf(&b, "**Reasoning:** %s\n", rec.Score.Reasoning)
		}
		if rec.Score.Error != nil {
			fmt.Fprintf(&b, "**Grader Error:** %s\n", rec.Score.Error.Message)
		}
	}
	b.WriteString("\n---\n\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func stepLine(st *schemas.Step) string {
	switch st.Type {
	case schemas.StepThought:
		return "[THOUGHT] " + cut(st.TextContent(), previewChars)
	case schemas.StepMessage:
		return "[MESSAGE] " + cut(st.TextContent(), previewChars)
	case schemas.StepUserMessage:
		return "[USER] " + cut(st.TextContent(), previewChars)
	case schemas.StepToolCall:
		s := fmt.Sprintf("[TOOL:%s] -> %s", st.Name, st.Status)
		if st.Duration != nil && *st.Duration > 0 {
			s += fmt.Sprintf(" (%dms)", *st.Duration)
		}
		return s
	case schemas.StepPlan:
		var entries []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		}
		_ = json.Unmarshal(st.Entries, &entries)
		parts := make([]string, len(entries))
		for i, e := range entries {
			parts[i] = e.Content + ": " + e.Status
		}
		return "[PLAN] " + cut(strings.Join(parts, ", "), planChars)
	case schemas.StepPermission:
		return fmt.Sprintf("[PERMISSION] %s -> %s", st.OptionID, st.Outcome)
	case schemas.StepFSRead, schemas.StepFSWrite:
		s := fmt.Sprintf("[%s] %s", strings.ToUpper(st.Type), st.Path)
		if st.Allowed != nil && !*st.Allowed {
			s += " (denied)"
		}
		return s
	case schemas.StepTerminal:
		return fmt.Sprintf("[TERMINAL] %s", strings.TrimSpace(st.Command+" "+strings.Join(st.Args, " ")))
	}
	return ""
}

func writeToolPreview(b *strings.Builder, st *schemas.Step) {
	var in map[string]any
	if json.Unmarshal(st.Input, &in) != nil {
		return
	}
	file, _ := in["file_path"].(string)
	if file == "" {
		file, _ = in["path"].(string)
	}
	content, _ := in["content"].(string)
	if content == "" {
		content, _ = in["new_string"].(string)
	}
	chars := len([]rune(content))
	if file != "" {
		if chars > 0 {
			fmt.Fprintf(b, "   File: %s (%d chars)\n", file, chars)
		} else {
			fmt.Fprintf(b, "   File: %s\n", file)
		}
	}
	if content == "" {
		return
	}
	if chars > maxContentChars {
		content = headTail(content, headLines, tailLines)
	}
	lang := "typescript"
	if file != "" {
		if ext := strings.TrimPrefix(path.Ext(file), "."); ext != "" {
			lang = ext
		} else {
			lang = path.Base(file)
		}
	}
	fmt.Fprintf(b, "   ```%s\n   %s\n   ```\n", lang, strings.ReplaceAll(content, "\n", "\n   "))
}

// headTail keeps the first head and last tail lines of s.
func headTail(s string, head, tail int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= head+tail {
		return s
	}
	omitted := len(lines) - head - tail
	out := append(slices.Clone(lines[:head]), fmt.Sprintf("// ... %d lines omitted ...", omitted))
	return strings.Join(append(out, lines[len(lines)-tail:]...), "\n")
}

// cut keeps the first n characters of s and marks a cut with "...".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}

// jsString renders a metadata value the way JavaScript's String() does for
// scalars; objects and arrays are written as JSON.
func jsString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	case float64:
		return jsNumber(x)
	case bool:
		return fmt.Sprint(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func jsNumber(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// CaseRow is one line of the aggregate table of summarize.
type CaseRow struct {
	ID       string
	Count    trials.CaseCount
	Duration int64 // summed over trials, ms
	Tools    int   // tool calls summed over trials
}

// Aggregate reads a results file into per-case rows (in first-seen order)
// and the run summary. The k of a case is its trials record's k, or for a
// capture file the number of records of the case.
func Aggregate(name string, r io.Reader, seed uint64, resamples int) ([]*CaseRow, schemas.TrialsSummary, string, error) {
	var rows []*CaseRow
	ks := map[string]int{}
	adaptive := map[string]*schemas.AdaptiveCase{}
	index := map[string]int{}
	row := func(id string) *CaseRow {
		i, ok := index[id]
		if !ok {
			i = len(rows)
			index[id] = i
			rows = append(rows, &CaseRow{ID: id, Count: trials.CaseCount{ID: id}})
		}
		return rows[i]
	}
	kind, err := schemas.ReadResults(name, r, func(l schemas.ResultLine) error {
		switch l.Kind {
		case schemas.KindCapture:
			row(l.Capture.ID).add(l.Capture)
		case schemas.KindTrials:
			if _, dup := ks[l.Trials.ID]; dup {
				return &schemas.InputError{File: name, Line: l.Line, Field: "id", Msg: fmt.Sprintf("case %q appears twice", l.Trials.ID)}
			}
			ks[l.Trials.ID] = l.Trials.K
			if l.Trials.Adaptive != nil {
				adaptive[l.Trials.ID] = l.Trials.Adaptive
			}
			rw := row(l.Trials.ID)
			for _, rec := range TrialCaptures(l.Trials) {
				rw.add(&rec)
			}
		}
		return nil
	})
	if err != nil {
		return nil, schemas.TrialsSummary{}, kind, err
	}
	if len(rows) == 0 {
		return nil, schemas.TrialsSummary{}, kind, &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	s := trials.NewSummary(0)
	for _, rw := range rows {
		k, ok := ks[rw.ID]
		if !ok || k < 1 {
			k = rw.Count.Trials
		}
		if a := adaptive[rw.ID]; a != nil {
			s.AddAdaptiveCount(&rw.Count, a)
			continue
		}
		s.AddCount(&rw.Count, k)
	}
	return rows, s.Result(seed, resamples), kind, nil
}

func (row *CaseRow) add(rec *schemas.CaptureRecord) {
	c := &row.Count
	c.Trials++
	pass, excluded := trials.Outcome(rec)
	switch excluded {
	case "":
		c.N++
		if pass {
			c.C++
		}
		c.ScoreSum += rec.Score.Score
		c.Scored++
	case trials.Ungraded:
		c.Ungraded++
	default:
		if c.Errors == nil {
			c.Errors = map[string]int{}
		}
		c.Errors[excluded]++
	}
	row.Duration += schemas.RecordDuration(rec)
	for j := range rec.Trajectory {
		if rec.Trajectory[j].Type == schemas.StepToolCall {
			row.Tools++
		}
	}
}

// WriteAggregate writes the per-case table and the summary table.
func WriteAggregate(w io.Writer, rows []*CaseRow, sum schemas.TrialsSummary) error {
	var b strings.Builder
	tw := newTable(&b)
	fmt.Fprintln(tw, "id\ttrials\tgraded\tpassed\tpass rate\t95% CI (Wilson)\tmean score\tmean ms\ttool calls\texcluded")
	for _, r := range rows {
		c := &r.Count
		rate, ci, score := "n/a", "n/a", "n/a"
		if c.N > 0 {
			rate = fmt.Sprintf("%.3f", float64(c.C)/float64(c.N))
			lo, hi, _ := trials.Wilson(c.C, c.N, trials.Z95)
			ci = fmt.Sprintf("[%.3f, %.3f]", lo, hi)
		}
		if m := c.MeanScore(); m != nil {
			score = fmt.Sprintf("%.3f", *m)
		}
		excl := trials.ClassCounts(c.Errors)
		if c.Ungraded > 0 {
			excl = strings.TrimPrefix(excl+fmt.Sprintf(", ungraded %d", c.Ungraded), "-, ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, c.Trials, c.N, c.C, rate, ci, score,
			r.Duration/int64(max(c.Trials, 1)), r.Tools, excl)
	}
	tw.Flush()
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return trials.WriteSummaryTable(w, sum)
}

// ModelCallsLine words a ledger's sums: "3 calls (1 failed), 1200 in +
// 800 cached + 20 cache write, 310 out (40 reasoning), $0.0123"; an
// unknown cost is "cost unknown (N unpriced)".
func ModelCallsLine(m schemas.ModelCallsSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d call", m.Calls)
	if m.Calls != 1 {
		b.WriteString("s")
	}
	if m.Failed > 0 {
		fmt.Fprintf(&b, " (%d failed)", m.Failed)
	}
	fmt.Fprintf(&b, ", %d in + %d cached + %d cache write, %d out", m.InputTokens, m.CachedTokens, m.CacheWriteTokens, m.OutputTokens)
	if m.ReasoningTokens > 0 {
		fmt.Fprintf(&b, " (%d reasoning)", m.ReasoningTokens)
	}
	if m.USD != nil {
		fmt.Fprintf(&b, ", $%.4f", *m.USD)
	} else {
		fmt.Fprintf(&b, ", cost unknown (%d unpriced)", m.Unpriced)
	}
	return b.String()
}
