package acp

import (
	"bufio"
	"context"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// TestJSONRPC2HandlesRequestsInOrder pins what the client takes from
// sourcegraph/jsonrpc2: without AsyncHandler, the connection calls Handle
// for one request at a time, in wire order, and reads nothing more until
// Handle returns. The client records agent requests in Handle, so their
// order on the record is their order on the wire; if an upgrade of the
// library changed this, this test fails.
func TestJSONRPC2HandlesRequestsInOrder(t *testing.T) {
	agentOut, clientIn := io.Pipe()
	clientOut, agentIn := io.Pipe()
	defer agentOut.Close()
	defer clientOut.Close()
	go io.Copy(io.Discard, clientOut)

	stream := newLineStream(agentOut, nopWriteCloser{agentIn}, time.Now, nil, nil)
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var order []string
	handled := make(chan struct{}, 3)
	h := handlerFunc(func(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) {
		in, ok := stream.take(r)
		if !ok {
			t.Errorf("%s: params not handed over", r.Method)
		}
		mu.Lock()
		order = append(order, r.Method+" "+string(in.params))
		mu.Unlock()
		if r.Method == "first" {
			close(started)
			<-release // while this runs, nothing else may be handled
		}
		handled <- struct{}{}
	})
	conn := jsonrpc2.NewConn(context.Background(), stream, h)
	defer conn.Close()

	go func() {
		io.WriteString(clientIn, `{"jsonrpc":"2.0","id":1,"method":"first","params":{"n":1}}`+"\n")
		io.WriteString(clientIn, `{"jsonrpc":"2.0","id":2,"method":"second","params":{"n":2}}`+"\n")
		io.WriteString(clientIn, `{"jsonrpc":"2.0","id":3,"method":"third","params":{"n":3}}`+"\n")
	}()
	<-started
	// Give an asynchronous library time to start the next requests.
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	got := len(order)
	mu.Unlock()
	if got != 1 {
		t.Fatalf("%d requests handled while the first one's Handle had not returned; want 1 (jsonrpc2 must call Handle synchronously)", got)
	}
	close(release)
	for range 3 {
		select {
		case <-handled:
		case <-time.After(5 * time.Second):
			t.Fatal("requests not handled")
		}
	}
	want := []string{`first {"n":1}`, `second {"n":2}`, `third {"n":3}`}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("handled %q, want %q", order, want)
		}
	}
}

// ReadLine returns lines without their endings, whole lines up to the limit
// in place, and longer ones cut with their full size; it never stops on a
// long line.
func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 100)
	br := bufio.NewReaderSize(strings.NewReader("short\r\n"+long+"\n"+long+long+"\nlast"), 16)
	type got struct {
		line string
		size int
		cut  bool
	}
	var lines []got
	for {
		line, size, cut, err := ReadLine(br, 150)
		if size > 0 {
			lines = append(lines, got{string(line), size, cut})
		}
		if err != nil {
			break
		}
	}
	want := []got{{"short", 7, false}, {long, 101, false}, {(long + long)[:150], 201, true}, {"last", 4, false}}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines\n got %+v\nwant %+v", lines, want)
	}
}
