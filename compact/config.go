package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Defaults of Config, the compression settings of docs/DESIGN.md#compactor
// and docs/DESIGN.md#compact-split.
const (
	// DefaultContextWindow is the context window of a session without its
	// own, in tokens.
	DefaultContextWindow = 128_000
	// DefaultThreshold is the fraction of the window at which a session
	// needs compaction (64,000 tokens of the default window).
	DefaultThreshold = 0.50
	// DefaultMinimumMessages: a session with fewer messages is never
	// compacted (too_few_messages).
	DefaultMinimumMessages = 8
	// DefaultHeadMessages is how many first messages are kept verbatim
	// (system prompt, first request, first answer).
	DefaultHeadMessages = 3
	// DefaultTailRatio is the tail's token budget as a fraction of the
	// threshold (12,800 tokens by default).
	DefaultTailRatio = 0.20
	// DefaultMaxSummaryTokens is the summary's budget in tokens.
	DefaultMaxSummaryTokens = 4_000
	// DefaultPruneMinTokens: older tool outputs above this many tokens are
	// stubbed by the pre-pass.
	DefaultPruneMinTokens = 200
	// DefaultPruneKeepRecent: the pre-pass never stubs this many newest tool
	// outputs of the middle.
	DefaultPruneKeepRecent = 3
	// DefaultMaxTranscriptBytes bounds one transcript's stored size
	// (compact.max_transcript_bytes): 64 MiB (docs/DESIGN.md#compact-bounds).
	DefaultMaxTranscriptBytes = 64 << 20
	// DefaultMaxTranscriptsPerUID bounds the transcripts one uid owns
	// (compact.max_transcripts_per_uid), compacted children included.
	DefaultMaxTranscriptsPerUID = 1024
	// MinTranscriptBytes and MaxTranscriptBytesLimit are the range of
	// compact.max_transcript_bytes: 1 MiB (one control-file write) to 1 TiB.
	MinTranscriptBytes      = 1 << 20
	MaxTranscriptBytesLimit = 1 << 40
	// DefaultMaxBytesPerUID bounds the bytes of the transcripts one uid
	// owns together (compact.max_bytes_per_uid): 1 GiB.
	DefaultMaxBytesPerUID = 1 << 30
	// MaxTranscriptsPerUIDLimit is the largest compact.max_transcripts_per_uid.
	MaxTranscriptsPerUIDLimit = 1_000_000
)

// ConfigFileName is the name of the compaction config (the JSON form of
// Config) in the state directory. Package config reads it, with the other
// sources, and the daemon hands the merged Config to Open: this package
// reads no configuration file or variable of its own
// (docs/DESIGN.md#options-table).
const ConfigFileName = "compact.json"

// Config is the compaction config (compact.json). Zero fields take the
// defaults above; WithDefaults fills them. It lives outside the mount (in
// the state directory) and nothing under .rubino can change it: the command
// backend runs a program as the daemon's user.
type Config struct {
	// ContextWindow in tokens, for sessions that set none.
	ContextWindow int `json:"context_window,omitempty"`
	// Threshold is the fraction (0 < t <= 1) of the window at which a
	// session needs compaction.
	Threshold float64 `json:"threshold,omitempty"`
	// MinimumMessages below which compaction is a no-op.
	MinimumMessages int `json:"minimum_messages,omitempty"`
	// HeadMessages kept verbatim at the start.
	HeadMessages int `json:"head_messages,omitempty"`
	// TailRatio is the tail budget as a fraction (0 < r < 1) of the
	// threshold in tokens.
	TailRatio float64 `json:"tail_ratio,omitempty"`
	// PreserveToolPairs runs the tool-pair sanitiser on the middle (default
	// true; docs/DESIGN.md#compact-split).
	PreserveToolPairs *bool `json:"preserve_tool_pairs,omitempty"`
	// MaxSummaryTokens is the summary's budget.
	MaxSummaryTokens int `json:"max_summary_tokens,omitempty"`
	// PruneMinTokens and PruneKeepRecent tune the pre-pass.
	PruneMinTokens  int `json:"prune_min_tokens,omitempty"`
	PruneKeepRecent int `json:"prune_keep_recent,omitempty"`
	// Model is the model of sessions that name none ("" = unknown, which
	// counts with cl100k_base).
	Model string `json:"model,omitempty"`
	// Tokenizer for sessions that name none ("" = by model).
	Tokenizer string `json:"tokenizer,omitempty"`
	// Summarizer chooses the backend.
	Summarizer SummarizerConfig `json:"summarizer,omitempty"`
	// MaxTranscriptBytes bounds one transcript's stored size in bytes
	// (messageBytes summed); an append past it fails with EFBIG and stores
	// nothing (docs/DESIGN.md#compact-bounds).
	MaxTranscriptBytes int64 `json:"max_transcript_bytes,omitempty"`
	// MaxTranscriptsPerUID bounds the transcripts one uid owns, compacted
	// children included; creating one past it fails with EAGAIN.
	MaxTranscriptsPerUID int `json:"max_transcripts_per_uid,omitempty"`
	// MaxBytesPerUID bounds the stored bytes of the transcripts one uid
	// owns together, compacted children included; an append or a
	// compaction past it fails with EFBIG and stores nothing.
	MaxBytesPerUID int64 `json:"max_bytes_per_uid,omitempty"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	orDefault(&c.ContextWindow, DefaultContextWindow)
	orDefault(&c.Threshold, DefaultThreshold)
	orDefault(&c.MinimumMessages, DefaultMinimumMessages)
	orDefault(&c.HeadMessages, DefaultHeadMessages)
	orDefault(&c.TailRatio, DefaultTailRatio)
	if c.PreserveToolPairs == nil {
		t := true
		c.PreserveToolPairs = &t
	}
	orDefault(&c.MaxSummaryTokens, DefaultMaxSummaryTokens)
	orDefault(&c.PruneMinTokens, DefaultPruneMinTokens)
	orDefault(&c.PruneKeepRecent, DefaultPruneKeepRecent)
	orDefault(&c.Summarizer.Backend, "builtin")
	orDefault(&c.MaxTranscriptBytes, DefaultMaxTranscriptBytes)
	orDefault(&c.MaxTranscriptsPerUID, DefaultMaxTranscriptsPerUID)
	orDefault(&c.MaxBytesPerUID, DefaultMaxBytesPerUID)
	return c
}

// orDefault sets *p to def when *p is its type's zero value.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Validate checks a config after WithDefaults.
func (c Config) Validate() error {
	switch {
	case c.ContextWindow < 1000 || c.ContextWindow > 100_000_000:
		return fmt.Errorf("context_window %d out of range (1000 to 100000000)", c.ContextWindow)
	case c.Threshold <= 0 || c.Threshold > 1:
		return fmt.Errorf("threshold %v out of range (0 < t <= 1)", c.Threshold)
	case c.HeadMessages < 0 || c.HeadMessages > 1000:
		return fmt.Errorf("head_messages %d out of range (0 to 1000)", c.HeadMessages)
	case c.MinimumMessages < c.HeadMessages+2:
		return fmt.Errorf("minimum_messages %d must be at least head_messages + 2 (%d)", c.MinimumMessages, c.HeadMessages+2)
	case c.TailRatio <= 0 || c.TailRatio >= 1:
		return fmt.Errorf("tail_ratio %v out of range (0 < r < 1)", c.TailRatio)
	case c.MaxSummaryTokens < 100:
		return fmt.Errorf("max_summary_tokens %d below 100", c.MaxSummaryTokens)
	case c.PruneMinTokens < 1 || c.PruneKeepRecent < 1:
		return errors.New("prune_min_tokens and prune_keep_recent must be at least 1")
	case len(c.Model) > maxNameBytes:
		return fmt.Errorf("model: at most %d bytes", maxNameBytes)
	case !ValidTokenizer(c.Tokenizer):
		return fmt.Errorf("unknown tokenizer %q", c.Tokenizer)
	case c.MaxTranscriptBytes < MinTranscriptBytes || c.MaxTranscriptBytes > MaxTranscriptBytesLimit:
		return fmt.Errorf("max_transcript_bytes %d out of range (%d to %d)", c.MaxTranscriptBytes, MinTranscriptBytes, int64(MaxTranscriptBytesLimit))
	case c.MaxBytesPerUID < MinTranscriptBytes || c.MaxBytesPerUID > MaxTranscriptBytesLimit:
		return fmt.Errorf("max_bytes_per_uid %d out of range (%d to %d)", c.MaxBytesPerUID, MinTranscriptBytes, int64(MaxTranscriptBytesLimit))
	case c.MaxTranscriptsPerUID < 1 || c.MaxTranscriptsPerUID > MaxTranscriptsPerUIDLimit:
		return fmt.Errorf("max_transcripts_per_uid %d out of range (1 to %d)", c.MaxTranscriptsPerUID, MaxTranscriptsPerUIDLimit)
	}
	if c.Summarizer.TimeoutSeconds < 0 {
		return errors.New("summarizer.timeout_seconds must not be negative")
	}
	_, err := NewSummarizer(c.Summarizer)
	return err
}

// ParseConfig parses compact.json (unknown fields are errors), applies the
// defaults and validates.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return Config{}, fmt.Errorf("compact config: %w", err)
		}
		if dec.More() {
			return Config{}, errors.New("compact config: trailing data after the object")
		}
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("compact config: %w", err)
	}
	return c, nil
}
