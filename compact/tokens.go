package compact

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Tokenizer names accepted in Config.Tokenizer and in a session's options.
const (
	// TokenizerAuto picks cl100k_base or o200k_base from the model name
	// (EncodingForModel).
	TokenizerAuto = ""
	// TokenizerCL100K is the BPE of GPT-4 and GPT-3.5; also the
	// approximation used for models without a public tokenizer (Claude,
	// Gemini, open models).
	TokenizerCL100K = "cl100k_base"
	// TokenizerO200K is the BPE of GPT-4o, GPT-4.1, GPT-5 and the o-series.
	TokenizerO200K = "o200k_base"
	// TokenizerChars4 is the explicit fallback: one token per four
	// characters (runes), rounded up. It is used only when asked for, or when
	// a BPE cannot be loaded (the tokenizer's Name then says so).
	TokenizerChars4 = "chars/4"
)

// Per-message overhead in tokens, as OpenAI's chat format counts it: each
// message costs 3 tokens of framing, and a name 1 more.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
)

// Tokenizer counts tokens of text. Implementations are safe for concurrent
// use.
type Tokenizer interface {
	// Name is the encoding's name (cl100k_base, o200k_base, chars/4), with
	// " (fallback: REASON)" appended when a BPE could not be loaded.
	Name() string
	// Count returns the number of tokens of s (0 for "").
	Count(s string) int
}

// bpeOnce installs the offline BPE loader once, before any encoding is
// loaded: tiktoken-go's default loader downloads the ranks over HTTP, the
// offline loader reads them from files embedded in the binary.
var bpeOnce sync.Once

// bpe caches loaded encodings by name; loading o200k takes ~0.2 s and tens
// of MB, so each is loaded at most once per process, on first use.
var (
	bpeMu    sync.Mutex
	bpeCache = map[string]*bpeTokenizer{}
)

type bpeTokenizer struct {
	name string
	enc  *tiktoken.Tiktoken
}

func (t *bpeTokenizer) Name() string { return t.name }

// maxRun bounds the BPE's work: tiktoken-go merges each regex piece in
// time quadratic in its length, so a long run without whitespace (base64,
// minified code) or of whitespace alone would take minutes per megabyte.
// Runs longer than maxRun bytes are counted in maxRun-byte chunks: still
// the BPE, off by at most a token per chunk.
const maxRun = 256

// Count counts s with the BPE, in bounded time (see maxRun).
func (t *bpeTokenizer) Count(s string) int {
	if s == "" {
		return 0
	}
	if !hasLongRun(s) {
		return len(t.enc.EncodeOrdinary(s))
	}
	n := 0
	start := 0 // start of the text not yet counted
	for i := 0; i < len(s); {
		j := runEnd(s, i)
		if j-i <= maxRun {
			i = j
			continue
		}
		if start < i {
			n += len(t.enc.EncodeOrdinary(s[start:i]))
		}
		for i < j {
			end := min(i+maxRun, j)
			for end < j && !utf8.RuneStart(s[end]) {
				end++
			}
			n += len(t.enc.EncodeOrdinary(s[i:end]))
			i = end
		}
		start = j
	}
	if start < len(s) {
		n += len(t.enc.EncodeOrdinary(s[start:]))
	}
	return n
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// runEnd returns the end of the run starting at i: bytes that are all
// ASCII whitespace, or all not.
func runEnd(s string, i int) int {
	sp := isSpace(s[i])
	j := i + 1
	for j < len(s) && isSpace(s[j]) == sp {
		j++
	}
	return j
}

// hasLongRun reports whether s has a run longer than maxRun.
func hasLongRun(s string) bool {
	if len(s) <= maxRun {
		return false
	}
	for i := 0; i < len(s); {
		j := runEnd(s, i)
		if j-i > maxRun {
			return true
		}
		i = j
	}
	return false
}

type chars4Tokenizer struct{ reason string }

func (t chars4Tokenizer) Name() string {
	if t.reason != "" {
		return TokenizerChars4 + " (fallback: " + t.reason + ")"
	}
	return TokenizerChars4
}

func (chars4Tokenizer) Count(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

// EncodingForModel returns the BPE encoding used for model: o200k_base for
// the GPT-4o / GPT-4.1 / GPT-4.5 / GPT-5 families, gpt-oss, chatgpt-4o and
// the o1/o3/o4 reasoning models; cl100k_base for everything else, including
// "" and models without a public tokenizer (Claude, Gemini, Llama), where it
// is a far closer estimate than characters/4. A provider prefix
// ("openai/gpt-4o") is ignored. Pure function.
func EncodingForModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "chatgpt-4o", "o1", "o3", "o4"} {
		if m == p || strings.HasPrefix(m, p+"-") || strings.HasPrefix(m, p+".") || (p == "gpt-5" && strings.HasPrefix(m, p)) {
			return TokenizerO200K
		}
	}
	return TokenizerCL100K
}

// NewTokenizer returns the tokenizer named by name (one of the Tokenizer*
// constants; TokenizerAuto resolves by model through EncodingForModel). An
// unknown name is an error. When a BPE cannot be loaded the chars/4
// tokenizer is returned together with the load error, so the caller decides
// whether to accept the fallback (the compressor does, and its status names
// it). Safe for concurrent use; encodings are loaded once per process from
// data embedded in the binary, never from the network.
func NewTokenizer(name, model string) (Tokenizer, error) {
	if name == TokenizerAuto {
		name = EncodingForModel(model)
	}
	switch name {
	case TokenizerChars4:
		return chars4Tokenizer{}, nil
	case TokenizerCL100K, TokenizerO200K:
	default:
		return nil, fmt.Errorf("unknown tokenizer %q (want %q, %q, %q or empty for the model's)", name, TokenizerCL100K, TokenizerO200K, TokenizerChars4)
	}
	bpeOnce.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	bpeMu.Lock()
	defer bpeMu.Unlock()
	if t, ok := bpeCache[name]; ok {
		return t, nil
	}
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		return chars4Tokenizer{reason: err.Error()}, fmt.Errorf("loading %s: %w", name, err)
	}
	t := &bpeTokenizer{name: name, enc: enc}
	bpeCache[name] = t
	return t, nil
}

// ValidTokenizer reports whether name is accepted by NewTokenizer.
func ValidTokenizer(name string) bool {
	switch name {
	case TokenizerAuto, TokenizerCL100K, TokenizerO200K, TokenizerChars4:
		return true
	}
	return false
}

// MessageTokens counts m's tokens with tk: content, tool-call names and
// arguments, the tool_call_id, plus the chat format's per-message overhead
// (3, and 1 more with a name). The result is what Message.Tokens holds.
func MessageTokens(tk Tokenizer, m *Message) int {
	n := tokensPerMessage + tk.Count(m.Content)
	if m.Name != "" {
		n += tokensPerName + tk.Count(m.Name)
	}
	for _, tc := range m.ToolCalls {
		n += tk.Count(tc.Function.Name) + tk.Count(tc.Function.Arguments) + tokensPerMessage
	}
	if m.ToolCallID != "" {
		n += tk.Count(m.ToolCallID)
	}
	return n
}

// sumTokens adds the stored token counts of msgs.
func sumTokens(msgs []Message) int {
	n := 0
	for i := range msgs {
		n += msgs[i].Tokens
	}
	return n
}
