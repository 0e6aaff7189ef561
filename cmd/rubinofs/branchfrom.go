package main

// `rubinofs branch new NAME --from CP [--session S]`: a branch that starts
// at a session's checkpoint (docs/DESIGN.md#branch-from). The daemon plans
// (the session's rewind to CP, a dry run); package branch replays the plan
// into the branch's base layer.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/branch"
	"github.com/rubinofs/rubinofs/journal"
)

// branchFromFlags are branch new's --from and --session.
func branchFromFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "from", Usage: "start the branch at checkpoint `CP` of the session (rubinofs checkpoints lists them) instead of the workspace as it is"},
		&cli.StringFlag{Name: "session", Usage: "with --from: the session `NAME` whose checkpoint it is (default: the caller's own, .rubino/self)"},
	}
}

// branchFrom reads --from and --session of c for the workspace mounted at
// mnt with state directory stateDir: nil when --from is not given, else
// the branch point (the session's rewind plan to CP, asked of the daemon
// as `rubinofs rewind --to CP --dry-run --force` asks it, so as the
// caller: docs/DESIGN.md#trust) and the session's name. A bad CP or
// --session without --from exits 2; a checkpoint the session does not
// have, a journal that is off, exit 1 with the daemon's reason.
func branchFrom(c *cli.Context, mnt, stateDir string) (*branch.From, string, error) {
	cp, session := c.String("from"), c.String("session")
	if c.Command.Name != "new" { // run --new-branch: its --session is the run's session
		return nil, "", nil
	}
	switch {
	case cp == "" && session != "":
		return nil, "", cli.Exit("rubinofs branch new: --session names the session of --from CP; give --from too", exitUsage)
	case cp == "":
		return nil, "", nil
	case !checkpointIDRE.MatchString(cp):
		return nil, "", cli.Exit(fmt.Sprintf("rubinofs branch new: --from %q is not a checkpoint id (cp and six digits, e.g. cp000000; rubinofs checkpoints lists them)", cp), exitUsage)
	}
	rel, err := journalFile(session)
	if err != nil {
		return nil, "", err
	}
	if session == "" { // the caller's own: .rubino/self names it
		t, err := os.Readlink(ctlPathOf(mnt, "self"))
		if err != nil {
			return nil, "", cli.Exit(fmt.Sprintf("rubinofs branch new: finding the caller's session: %v", err), 1)
		}
		session = filepath.Base(t)
	}
	out, err := journalRequest(mnt, rel, "rewind", "--to", cp, "--dry-run", "--force")
	if err != nil {
		return nil, "", cli.Exit(fmt.Sprintf("rubinofs branch new: --from %s: %s", cp, journalError(err, c.String("session"))), 1)
	}
	var rep rewindReply
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, "", cli.Exit(fmt.Sprintf("rubinofs branch new: the rewind plan is not JSON: %v: %q", err, clip(string(out), 200)), 1)
	}
	if len(rep.Plan.Unrecoverable) > 0 {
		var ps []string
		for _, u := range rep.Plan.Unrecoverable {
			ps = append(ps, fmt.Sprintf("%s (%s)", u.Path, strings.TrimPrefix(u.Unrecoverable, "unrecoverable: ")))
		}
		return nil, "", cli.Exit(fmt.Sprintf("rubinofs branch new: --from %s: the journal of session %s kept no bytes of %s as they were then; nothing was made", cp, session, strings.Join(ps, ", ")), 1)
	}
	blobs := journal.BlobsAt(filepath.Join(stateDir, "journal", "blobs"))
	return &branch.From{Plan: rep.Plan, Blobs: blobs}, session, nil
}
