// Package schemas holds the data formats harness reads and writes, as Go
// types: the prompt case (input), the capture record and its trajectory steps
// (output of capture), the grader result, and the trials record.
//
// Every format is JSON Lines with camelCase field names, a superset of the
// formats of the TypeScript acp-harness, so files and jq pipelines written
// for it keep working.
package schemas
