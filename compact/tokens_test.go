package compact

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestEncodingForModel(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": TokenizerO200K, "gpt-4o-mini": TokenizerO200K, "openai/gpt-4.1-2025-04-14": TokenizerO200K,
		"gpt-5": TokenizerO200K, "gpt-5-codex": TokenizerO200K, "o3-mini": TokenizerO200K, "o1": TokenizerO200K, "gpt-oss-120b": TokenizerO200K,
		"gpt-4": TokenizerCL100K, "gpt-4-turbo": TokenizerCL100K, "gpt-3.5-turbo": TokenizerCL100K,
		"claude-sonnet-4-5": TokenizerCL100K, "": TokenizerCL100K, "o1984-custom": TokenizerCL100K,
	} {
		if got := EncodingForModel(model); got != want {
			t.Errorf("EncodingForModel(%q) = %s, want %s", model, got, want)
		}
	}
}

func TestTokenizerCounts(t *testing.T) {
	cl, err := NewTokenizer("", "gpt-4")
	if err != nil {
		t.Fatal(err)
	}
	o2, err := NewTokenizer("", "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if cl.Name() != TokenizerCL100K || o2.Name() != TokenizerO200K {
		t.Fatalf("names %s, %s", cl.Name(), o2.Name())
	}
	// Reference counts from OpenAI's tiktoken (its cookbook's examples).
	for _, tc := range []struct {
		tk   Tokenizer
		text string
		want int
	}{
		{cl, "hello world", 2},
		{o2, "hello world", 2},
		{cl, "", 0},
		{cl, "tiktoken is great!", 6},
		{o2, "tiktoken is great!", 6},
		{cl, "antidisestablishmentarianism", 6},
		{o2, "antidisestablishmentarianism", 6},
		{cl, "お誕生日おめでとう", 9},
		{o2, "お誕生日おめでとう", 8},
	} {
		if got := tc.tk.Count(tc.text); got != tc.want {
			t.Errorf("%s.Count(%q) = %d, want %d", tc.tk.Name(), tc.text, got, tc.want)
		}
	}
	// A special-token string in user content is counted as text, never a
	// panic.
	if n := cl.Count("<|endoftext|> x"); n < 3 {
		t.Errorf("special token text counted as %d", n)
	}
	// The BPE is not chars/4: code and prose differ from the guess.
	ch, _ := NewTokenizer(TokenizerChars4, "")
	text := strings.Repeat("func (s *Store) Close() error { return s.db.Close() }\n", 50)
	if cl.Count(text) == ch.Count(text) {
		t.Errorf("cl100k and chars/4 agree on %d tokens; the BPE is not in use", ch.Count(text))
	}
	if ch.Count("abcde") != 2 || ch.Name() != TokenizerChars4 {
		t.Errorf("chars/4: %d %s", ch.Count("abcde"), ch.Name())
	}
	if _, err := NewTokenizer("bpe-9000", ""); err == nil {
		t.Error("unknown tokenizer accepted")
	}
	m := Message{Role: RoleAssistant, Content: "hello world", ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "bash", Arguments: `{"cmd":"ls"}`}}}}
	if got, want := MessageTokens(cl, &m), 3+2+cl.Count("bash")+cl.Count(`{"cmd":"ls"}`)+3; got != want {
		t.Errorf("MessageTokens = %d, want %d", got, want)
	}
}

// TestTokenizerOffline loads both encodings in a fresh process whose
// network access would fail (proxies pointing at a closed port, an empty
// tiktoken cache): tiktoken-go's default loader downloads the BPE ranks, the
// offline loader must not.
func TestTokenizerOffline(t *testing.T) {
	if os.Getenv("COMPACT_OFFLINE_HELPER") == "1" {
		for _, name := range []string{TokenizerCL100K, TokenizerO200K} {
			tk, err := NewTokenizer(name, "")
			if err != nil {
				fmt.Println("FAIL", err)
				os.Exit(1)
			}
			fmt.Println(tk.Name(), tk.Count("hello world"))
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTokenizerOffline$")
	cmd.Env = append(os.Environ(), "COMPACT_OFFLINE_HELPER=1",
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9",
		"NO_PROXY=", "no_proxy=", "TIKTOKEN_CACHE_DIR="+t.TempDir(), "DATA_GYM_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("offline load: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "cl100k_base 2") || !strings.Contains(string(out), "o200k_base 2") {
		t.Fatalf("offline load output:\n%s", out)
	}
}

// TestTokenizerLongRuns: runs without whitespace (base64, minified code)
// are counted in chunks, close to the exact count, and 256 KiB of them
// finish (unchunked, tiktoken-go's quadratic merge would take many minutes).
func TestTokenizerLongRuns(t *testing.T) {
	tk, _ := NewTokenizer(TokenizerCL100K, "")
	bpe := tk.(*bpeTokenizer)
	for _, s := range []string{strings.Repeat("QUJDREVG", 256), strings.Repeat("x", 2048), strings.Repeat(" ", 2048), "pre " + strings.Repeat("a=b;", 400) + " post"} {
		exact := len(bpe.enc.EncodeOrdinary(s))
		got := tk.Count(s)
		if d := got - exact; d < 0 || d > len(s)/maxRun+1 {
			t.Errorf("%.8q x%d: chunked %d, exact %d", s, len(s), got, exact)
		}
	}
	if n := tk.Count(strings.Repeat("QUJD", 1<<16)); n < 1<<15 {
		t.Errorf("256 KiB of base64: %d tokens", n)
	}
	if n := tk.Count(strings.Repeat("\n", 1<<18)); n < 1<<8 {
		t.Errorf("256 KiB of newlines: %d tokens", n)
	}
}
