package slurm

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// What scontrol show job -o prints for an array job with one task done,
// one running, one failed and two still pending.
const scontrolOut = `JobId=10 ArrayJobId=9 ArrayTaskId=1 JobName=h JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=vm
JobId=11 ArrayJobId=9 ArrayTaskId=2 JobName=h JobState=RUNNING Reason=None ExitCode=0:0 NodeList=vm
JobId=12 ArrayJobId=9 ArrayTaskId=3 JobName=h JobState=FAILED Reason=NonZeroExitCode ExitCode=2:0 NodeList=vm
JobId=9 ArrayJobId=9 ArrayTaskId=4-5 JobName=h JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=(null)
`

func TestParseTasks(t *testing.T) {
	ts := ParseTasks([]byte(scontrolOut))
	if len(ts) != 5 {
		t.Fatalf("%d tasks: %+v", len(ts), ts)
	}
	if ts[1].State != "COMPLETED" || !ts[1].Terminal() || ts[2].Terminal() || ts[3].ExitCode != 2 || ts[5].State != "PENDING" || ts[5].JobID != "9" {
		t.Errorf("tasks %+v", ts)
	}
}

func TestIndexes(t *testing.T) {
	for in, want := range map[string][]int{"1-3,7": {1, 2, 3, 7}, "2-4%2": {2, 3, 4}, "5": {5}, "x": nil} {
		if got := Indexes(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"plain/path-1.jsonl": "plain/path-1.jsonl", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'"} {
		if got := Quote(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// Submit passes the array and options to sbatch and reads the job id of
// --parsable (with or without a cluster name); a rejection carries
// sbatch's message.
func TestSubmit(t *testing.T) {
	var got []string
	c := &Client{Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		got = append([]string{name}, args...)
		return []byte("42;cluster\n"), nil
	}}
	id, err := c.Submit(context.Background(), "/d/job.sh", "1-4", []string{"--partition=gpu"})
	if err != nil || id != "42" || strings.Join(got, " ") != "sbatch --parsable --array=1-4 --partition=gpu /d/job.sh" {
		t.Errorf("id %q err %v argv %v", id, err, got)
	}
	c.Run = func(context.Context, string, ...string) ([]byte, error) {
		return nil, &CommandError{Command: "sbatch", Message: "sbatch: error: invalid partition specified: x"}
	}
	if _, err := c.Submit(context.Background(), "/d/job.sh", "1", nil); err == nil || err.Error() != "sbatch: error: invalid partition specified: x" {
		t.Errorf("rejection: %v", err)
	}
}
