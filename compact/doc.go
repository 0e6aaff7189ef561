// Package compact is rubinofs's context compaction: a session store for
// agent transcripts and a compressor that shrinks a long transcript to its
// head, a summary of its middle and its recent tail, without breaking
// tool-call pairs and without thrashing when compaction stops paying.
//
// The semantics are those of the seed Rubino::Context::Compressor
// (shared/seeds/004): the no-op gates (too few messages, below the token
// threshold, for the manual path too), the flush hook, the head / middle /
// tail split, the tool-pair sanitiser, the LLM-free pre-pass (#415d), the
// iterative summary, the one-transaction commit of the summary row and the
// child session, the result, the anti-thrashing back-off (#415a) and the
// short-id resolution before any message lookup (#352).
//
// Savings are measured net: the tokens of the transcript before, minus the
// tokens of the transcript as it would be stored after (head + summary +
// tail), counted with the tokenizer the threshold uses. saved_tokens, the
// percentages and the thrashing back-off all use that figure;
// removed_tokens reports the gross middle. A compaction whose result would
// save less than MinSavedTokens (or grow the session) is a no-op, forced or
// not: a child no smaller than its parent would need compacting again at
// once, and every run would fork another one. Such a run is still logged
// (compaction_runs), so repeated ineffective runs trip the back-off.
//
// Files by concern:
//
//	message.go              OpenAI chat messages: parsing, validation, JSON form
//	tokens.go               tiktoken counts (cl100k_base / o200k_base by model, offline)
//	store.go                SQLite store (WAL, versioned migrations), prefix ids, atomic commit
//	boundary.go             head / middle / tail split, tool-pair sanitiser
//	prune.go                the pre-pass: dedupe and stub tool outputs
//	compressor.go           Compressor: gates, thrashing, Compact, Status
//	runs.go                 the compaction_runs log the back-off reads
//	summarizer*.go          backends: builtin (extractive), command, openai
//	config.go               compact.json
//	ctl.go                  the .rubino/compact control files (package ctltree)
//	importer.go             Claude Code and Codex session files -> messages
//
// The package never imports FUSE; the daemon mounts Service.Node under
// .rubino/compact. Everything here is safe for concurrent use unless a
// type says otherwise.
package compact
