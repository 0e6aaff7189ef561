package main

// The prompt checkpoint of `rubinofs hook claude-code`: at each
// UserPromptSubmit event the hook marks a checkpoint in the session's
// change journal, labelled "prompt: " and the prompt's start, so that
// `rubinofs rewind --to ID` undoes everything the turn changed, Bash
// included. A prompt is never held up or refused for it: the hook bounds
// its wait and swallows every failure (stderr, exit 0).

import (
	"fmt"
	"strings"
	"time"
)

// promptLabelRunes is how much of the prompt labels its checkpoint, in
// characters (runes).
const promptLabelRunes = 60

// promptCheckpointTimeout bounds the hook's wait for the mount (finding
// it and the checkpoint request). A working mount answers in
// milliseconds; a hung one costs the prompt this, then the hook exits 0
// and the abandoned request dies with the process.
var promptCheckpointTimeout = 5 * time.Second

// promptCheckpointRequest sends the checkpoint request (journalRequest on
// the caller's own session); a variable so that a test can stand in a
// mount that never answers.
var promptCheckpointRequest = func(mnt, label string) error {
	_, err := journalRequest(mnt, "self/journal", "checkpoint", label)
	return err
}

// promptLabel is the checkpoint label of prompt: "prompt: " and its first
// promptLabelRunes characters, white space runs (newlines included) made
// one space.
func promptLabel(prompt string) string {
	r := []rune(strings.Join(strings.Fields(prompt), " "))
	if len(r) > promptLabelRunes {
		r = r[:promptLabelRunes]
	}
	return "prompt: " + string(r)
}

// promptCheckpoint checkpoints the session of the hook's caller on the
// mount (hookMount of mountFlag and the event's cwd), waiting at most
// promptCheckpointTimeout. Its error is the hook's own, for stderr.
func promptCheckpoint(mountFlag string, ev *hookEvent) error {
	request, bound := promptCheckpointRequest, promptCheckpointTimeout
	done := make(chan error, 1) // the abandoned request's send never blocks
	go func() {
		mnt, err := hookMount(mountFlag, ev.Cwd)
		if err == nil {
			err = request(mnt, promptLabel(ev.Prompt))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("no checkpoint for this prompt: %w", err)
		}
		return nil
	case <-time.After(bound): // a bound on a hung mount, not a synchronisation
		return fmt.Errorf("no checkpoint for this prompt: the mount did not answer within %v", bound)
	}
}
