package rundir

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/schemas"
)

func TestNewNamesAfterTimeAndSuite(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	now := time.Date(2026, 11, 23, 10, 15, 0, 0, time.FixedZone("CET", 3600))
	var got []string
	for range 3 {
		dir, err := New(runs, "nightly", now)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Fatalf("%s not made: %v", dir, err)
		}
		got = append(got, filepath.Base(dir))
	}
	want := []string{"20261123T091500Z-nightly", "20261123T091500Z-nightly-2", "20261123T091500Z-nightly-3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("names %v, want %v", got, want)
	}
}

func TestCreateRefusesAnExistingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := Create(dir); err != nil {
		t.Fatal(err)
	}
	if err := Create(dir); !errors.Is(err, os.ErrExist) {
		t.Errorf("second Create: %v, want os.ErrExist", err)
	}
}

func TestOpenToResume(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenToResume(dir); !errors.Is(err, ErrNotRunDir) {
		t.Errorf("no manifest: %v, want ErrNotRunDir", err)
	}
	if err := Write(dir, &Manifest{Status: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenToResume(dir); err == nil || errors.Is(err, ErrNotRunDir) || !strings.Contains(err.Error(), "names no suite file") {
		t.Errorf("no suite: %v", err)
	}
	if err := Write(dir, &Manifest{Suite: Suite{Path: "/s.yaml"}}); err != nil {
		t.Fatal(err)
	}
	if m, err := OpenToResume(dir); err != nil || m.Suite.Path != "/s.yaml" {
		t.Errorf("a run: %+v, %v", m, err)
	}
}

func TestWriteCases(t *testing.T) {
	dir := t.TempDir()
	cases := []schemas.PromptCase{{ID: "a", Input: schemas.SingleTurn("<b>")}, {ID: "c", Input: schemas.SingleTurn("d")}}
	if err := WriteCases(dir, cases); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CasesName))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := schemas.ScanPrompts(CasesName, bytes.NewReader(b), func(_ int, c schemas.PromptCase) error {
		ids = append(ids, c.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "a,c" {
		t.Errorf("cases file %s", b)
	}
}
