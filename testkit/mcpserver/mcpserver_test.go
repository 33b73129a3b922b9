package mcpserver

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client over a pipe lists the lookup and read tools and calls them.
func TestLookupOverPipes(t *testing.T) {
	ctx := context.Background()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, sr, sw) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 2 || tools.Tools[0].Name != "lookup" || tools.Tools[1].Name != "read" {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	if cs.InitializeResult().ServerInfo.Name != Name {
		t.Errorf("server info %+v", cs.InitializeResult().ServerInfo)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"key": "blue"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "mcp-value-of-blue") {
		t.Errorf("result %+v", res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"key": ""}})
	if err != nil || !res.IsError {
		t.Errorf("empty key: %+v, %v", res, err)
	}
	file := filepath.Join(t.TempDir(), "marker")
	if err := os.WriteFile(file, []byte("only-here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": file}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "only-here\n" {
		t.Errorf("read %s: %+v, %v", file, res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": file + ".missing"}})
	if err != nil || !res.IsError {
		t.Errorf("read of a missing file: %+v, %v", res, err)
	}
	cs.Close()
	<-done
}
