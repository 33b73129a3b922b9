package results

import "strings"

// ArtifactsDir is where the artifacts of the trials of the results file
// output go: its name without .gz, .zst and .jsonl, then ".artifacts"
// (OUT.jsonl gives OUT.artifacts), each trial's in a directory of its own.
func ArtifactsDir(output string) string {
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(output, ".gz"), ".zst"), ".jsonl") + ".artifacts"
}
