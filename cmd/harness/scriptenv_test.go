package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmClusterProbe checks that the probe behind the [slurm] script
// condition asks the cluster of the configuration it is given, so that it
// agrees with the scripts, which get the same SLURM_CONF, and says why
// when no cluster answers.
func TestSlurmClusterProbe(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "no-such-slurm.conf")
	up, why := slurmCluster(conf)
	if up {
		t.Fatalf("a cluster answers under %s, a file that does not exist", conf)
	}
	if why == "" {
		t.Fatal("no reason given")
	}
	if _, err := exec.LookPath("sbatch"); err == nil && !strings.Contains(why, "SLURM_CONF="+conf) {
		t.Errorf("reason %q does not name SLURM_CONF=%s", why, conf)
	}
}
