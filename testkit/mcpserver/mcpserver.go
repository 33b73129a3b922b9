// Package mcpserver is a small MCP server for tests, on the official Go
// MCP SDK: a task or a run gives it to an agent, and the agent's calls of
// its tools show in the trajectory. Its tool "lookup" answers a fixed
// word for a key, so a test can tell that the tool (and nothing else)
// produced it; its tool "read" answers a file's text as the server sees
// it, so a test can tell where the server ran (a file only an image has).
package mcpserver

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the server's name in its MCP initialize answer.
const Name = "harness-test-mcp"

// LookupInput is the lookup tool's input.
type LookupInput struct {
	// Key is the word to look up.
	Key string `json:"key" jsonschema:"the key to look up"`
}

// LookupOutput is the lookup tool's structured answer.
type LookupOutput struct {
	// Value is the key's value.
	Value string `json:"value"`
}

// ReadInput is the read tool's input.
type ReadInput struct {
	// Path is the file to read, as the server sees it.
	Path string `json:"path" jsonschema:"the absolute path of the file to read"`
}

// ReadOutput is the read tool's structured answer.
type ReadOutput struct {
	// Text is the file's content.
	Text string `json:"text"`
}

// Value is what lookup answers for key: a word no model invents.
func Value(key string) string { return "mcp-value-of-" + key }

// NewServer returns the server with its tools.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Looks a key up and answers its value."},
		func(_ context.Context, _ *mcp.CallToolRequest, in LookupInput) (*mcp.CallToolResult, LookupOutput, error) {
			if in.Key == "" {
				return nil, LookupOutput{}, fmt.Errorf("lookup: key is empty")
			}
			v := Value(in.Key)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, LookupOutput{Value: v}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Reads a file where the server runs and answers its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				return nil, ReadOutput{}, fmt.Errorf("read: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, ReadOutput{Text: string(b)}, nil
		})
	return s
}

// Serve runs the server over a stdio-like pair until the client goes away.
func Serve(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	return NewServer().Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
}

// Main serves on standard input and output: what a test binary that stands
// in for the server calls.
func Main() int {
	if err := NewServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		return 1
	}
	return 0
}
