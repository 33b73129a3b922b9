package ledger

import (
	"testing"

	"harness/schemas"
)

// TestReadUsage reads a whole answer's tokens as a Meter does: Anthropic's
// cache reads and writes apart from its input, OpenAI's cached input taken
// out of its prompt tokens.
func TestReadUsage(t *testing.T) {
	a := schemas.ModelCall{Provider: Anthropic}
	ReadUsage(&a, []byte(`{"type":"message","usage":{"input_tokens":111,"cache_read_input_tokens":7,"cache_creation_input_tokens":3,"output_tokens":22}}`))
	if v(a.InputTokens) != 111 || v(a.CachedTokens) != 7 || v(a.CacheWriteTokens) != 3 || v(a.OutputTokens) != 22 {
		t.Errorf("anthropic %+v", a)
	}
	o := schemas.ModelCall{Provider: OpenAI}
	ReadUsage(&o, []byte(`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":40}}}`))
	if v(o.InputTokens) != 60 || v(o.CachedTokens) != 40 || v(o.OutputTokens) != 5 || o.CacheWriteTokens != nil {
		t.Errorf("openai %+v", o)
	}
	n := schemas.ModelCall{Provider: OpenAI}
	ReadUsage(&n, []byte(`{"choices":[]}`))
	if n.InputTokens != nil {
		t.Errorf("no usage %+v", n)
	}
}

func v(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
