package graders

import (
	"context"
	"os/exec"
	"testing"
)

// Per-call cost of grading one record: an in-process JavaScript grader
// against spawning an executable grader.
//
//	go test -run '^$' -bench . -benchmem ./graders/

func benchGrade(b *testing.B, spec string) {
	g, err := Load(spec, Options{})
	if err != nil {
		b.Fatal(err)
	}
	in := &Input{Record: record("The answer is 42, as explained at some length here.", "42")}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := g.Grade(ctx, in); r.Error != nil {
			b.Fatal(r.Error.Message)
		}
	}
}

// BenchmarkJSScript is seed 002's length check (RFT script config).
func BenchmarkJSScript(b *testing.B) { benchGrade(b, fx("seed002/length-check.yaml")) }

// BenchmarkJSModuleTS is seed 004's TypeScript module (async grade).
func BenchmarkJSModuleTS(b *testing.B) { benchGrade(b, fx("seed004/my-grader.ts")) }

// BenchmarkExecShell spawns a /bin/sh grader that prints a fixed result.
func BenchmarkExecShell(b *testing.B) { benchGrade(b, fx("errors/ok.sh")) }

// BenchmarkExecPython spawns seed 004's Python grader.
func BenchmarkExecPython(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed")
	}
	benchGrade(b, fx("seed004/grader.py"))
}
