package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"harness/internal/fakeagent"
)

// TestMain lets the test binary double as the harness command in scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"harness":   main,
		"fakeagent": fakeagent.Run,
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("TESTDATA", mustAbs(t, "../../testdata"))
			return nil
		},
	})
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/" + p
}
