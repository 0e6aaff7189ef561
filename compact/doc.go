// Package compact is rubinofs's context compaction: a session store for
// agent transcripts and a compressor that shrinks a long transcript to its
// head, a summary of its middle and its recent tail, without breaking
// tool-call pairs and without thrashing when compaction stops paying.
//
// Each request passes the no-op gates (too few messages, below the token
// threshold, for a forced request too), then runs the flush hook, the head /
// middle / tail split with the tool-pair sanitiser
// (docs/DESIGN.md#compact-split), the LLM-free pre-pass
// (docs/DESIGN.md#compact-prune-pass), the summary built on the previous
// one, and one transaction that commits the summary row and the child
// session (docs/DESIGN.md#compactor). Automatic compaction backs off when it
// stops paying (docs/DESIGN.md#compact-backoff), and a short id is resolved
// to the full id before any message is looked up
// (docs/DESIGN.md#compact-short-ids).
//
// Savings are measured net: the tokens of the transcript before, minus the
// tokens of the transcript as it would be stored after (head + summary +
// tail), counted with the tokenizer the threshold uses. saved_tokens, the
// percentages and the thrashing back-off all use that figure;
// removed_tokens reports the gross middle. A compaction whose result would
// save less than MinSavedTokens (or grow the session) is a no-op, forced or
// not: a child no smaller than its parent would need compacting again at
// once, and every run would fork another one. Such a run is still logged
// (compaction_runs), so repeated ineffective runs trip the back-off
// (docs/DESIGN.md#compact-net-savings).
//
// Files by concern:
//
//	message.go              OpenAI chat messages: parsing, validation, JSON form, JSON-lines batches
//	tokens.go               tiktoken counts (cl100k_base / o200k_base by model, offline)
//	store.go                SQLite store: open (WAL, pragmas), versioned migrations, query helpers
//	ids.go                  session ids: new ids, full id or unique prefix -> full id
//	sessions.go             sessions and their messages: create, list, counts, ancestry, append, read
//	summaries.go            summary rows and their queries
//	commit.go               the one-transaction commit of a compaction
//	runs.go                 the compaction_runs log the back-off reads
//	boundary.go             head / middle / tail split, tool-pair sanitiser
//	prune.go                the pre-pass: dedupe and stub tool outputs
//	compressor.go           Compressor: gates, thrashing, Compact, Status
//	stream.go               bounded-memory reads: per-message metadata, the split on it, the middle window
//	owner.go                transcript ownership (Scope), the per-uid cap, deleting a transcript tree
//	transcript.go           appending JSON lines to a session, a session's lineage
//	summarizer*.go          backends: builtin (extractive), command, openai
//	config.go               Config, its JSON form (compact.json, read by package config)
//	ctl.go                  Service: the .rubino/compact control files (package ctltree)
//	importer.go             Claude Code and Codex session files -> messages
//
// The package never imports FUSE; *Service is a ctltree.Feature that the
// daemon plugs into the control tree as .rubino/compact. Everything here is safe for concurrent use unless a
// type says otherwise.
package compact
