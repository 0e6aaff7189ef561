package compact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// OpenAISummarizer asks an OpenAI-compatible chat-completions endpoint for
// the summary: POST BaseURL + "/chat/completions" with the model, a system
// message (SystemPrompt), a user message (BuildPrompt) and max_tokens; the
// summary is choices[0].message.content. The API key is read from the
// environment variable APIKeyEnv at each call and sent as a bearer token
// (none when unset). Errors: a transport error, a non-2xx status (quoting
// the API's error message), an empty answer; ErrSummarizerTimeout after
// Timeout. Safe for concurrent use.
type OpenAISummarizer struct {
	BaseURL   string
	Model     string
	APIKeyEnv string
	Timeout   time.Duration // 0: DefaultSummarizerTimeout
	// Client is the HTTP client (nil: http.DefaultClient; the timeout is
	// applied through the request's context).
	Client *http.Client
}

// Name returns "openai".
func (*OpenAISummarizer) Name() string { return "openai" }

type chatRequest struct {
	Model     string        `json:"model"`
	Messages  []chatMessage `json:"messages"`
	MaxTokens int           `json:"max_tokens,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// Summarize calls the endpoint.
func (o *OpenAISummarizer) Summarize(ctx context.Context, req SummaryRequest) (string, error) {
	timeout := summarizerTimeout(o.Timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(chatRequest{
		Model: o.Model,
		Messages: []chatMessage{
			{Role: "system", Content: SystemPrompt},
			{Role: "user", Content: BuildPrompt(req)},
		},
		MaxTokens: req.MaxTokens,
	})
	if err != nil {
		return "", err
	}
	url := strings.TrimRight(o.BaseURL, "/") + "/chat/completions"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("summarizer openai: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	// The key is a credential, not configuration: the config names only
	// the variable (compact.summarizer.api_key_env), so the key is never in
	// a file, `config show` or compact/config (docs/DESIGN.md#options-table).
	if key := os.Getenv(o.APIKeyEnv); key != "" {
		hreq.Header.Set("Authorization", "Bearer "+key)
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%w: %s did not answer within %v", ErrSummarizerTimeout, url, timeout)
		}
		return "", fmt.Errorf("summarizer openai: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4*maxSummaryBytes))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%w: %s did not answer within %v", ErrSummarizerTimeout, url, timeout)
		}
		return "", fmt.Errorf("summarizer openai: reading the answer: %w", err)
	}
	var cr chatResponse
	jsonErr := json.Unmarshal(raw, &cr)
	if resp.StatusCode/100 != 2 {
		msg := oneLine(string(raw), 300)
		if jsonErr == nil && cr.Error != nil && cr.Error.Message != "" {
			msg = oneLine(cr.Error.Message, 300)
		}
		return "", fmt.Errorf("summarizer openai: %s: %s", resp.Status, msg)
	}
	if jsonErr != nil {
		return "", fmt.Errorf("summarizer openai: malformed answer: %v", jsonErr)
	}
	if len(cr.Choices) == 0 {
		return "", errors.New("summarizer openai: the answer has no choices")
	}
	out := strings.TrimSpace(cr.Choices[0].Message.Content)
	if out == "" {
		return "", errors.New("summarizer openai: empty summary")
	}
	if len(out) > maxSummaryBytes {
		return "", fmt.Errorf("summarizer openai: summary exceeds %d bytes", maxSummaryBytes)
	}
	return out, nil
}
