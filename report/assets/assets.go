// Package assets holds the page files harness report and harness view
// share: the transcript renderer (a trial's verdict with every check's
// evidence, its timing bar, record and steps) and its styles. The report
// inlines them into its one file; the viewer serves them.
package assets

import "embed"

// FS holds the shared files and the report's own (report.html.tmpl,
// report.css, report.js).
//
//go:embed transcript.js transcript.css report.html.tmpl report.css report.js
var FS embed.FS

// Shared says whether name is one of the files the viewer serves from FS.
func Shared(name string) bool {
	return name == "transcript.js" || name == "transcript.css"
}

// Text returns a file of FS as a string (empty when it is not there).
func Text(name string) string {
	b, _ := FS.ReadFile(name)
	return string(b)
}
