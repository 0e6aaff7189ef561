package compact

// Transcript ownership and bounds in the store: who may see a transcript
// (Scope), the per-uid count cap, and deleting a transcript with the ones
// compacted from it (docs/DESIGN.md#compact-bounds).

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
)

// Scope is who asks about transcripts. An administrator (All: the mount
// owner or root outside every agent session) sees every transcript;
// anyone else sees only those its UID owns (docs/DESIGN.md#compact-bounds).
// A transcript stored before transcripts had owners (owner NULL) is seen
// by administrators only.
type Scope struct {
	All bool
	UID uint32
}

// AllScope sees every transcript (the daemon's own calls, tests).
var AllScope = Scope{All: true}

// UIDScope sees the transcripts uid owns.
func UIDScope(uid uint32) Scope { return Scope{UID: uid} }

// cond is an SQL condition on table alias s selecting the rows sc sees;
// its arguments are args().
func (sc Scope) cond() string {
	if sc.All {
		return "1"
	}
	return "s.owner = ?"
}

func (sc Scope) args() []any {
	if sc.All {
		return nil
	}
	return []any{int64(sc.UID)}
}

// Sees reports whether sc may see and use sess.
func (sc Scope) Sees(sess Session) bool {
	return sc.All || (sess.Owner != nil && *sess.Owner == sc.UID)
}

func ownerOf(v sql.NullInt64) *uint32 {
	if !v.Valid || v.Int64 < 0 {
		return nil
	}
	u := uint32(v.Int64)
	return &u
}

// checkOwnerCap returns ErrTooMany when owner already owns max transcripts
// or more (max 0: no cap). It runs inside the creating transaction.
func checkOwnerCap(ctx context.Context, tx *sql.Tx, owner uint32, max int) error {
	if max <= 0 {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions WHERE owner = ?`, int64(owner)).Scan(&n); err != nil {
		return err
	}
	if n >= max {
		return fmt.Errorf("%w: uid %d owns %d transcripts, the limit compact.max_transcripts_per_uid (%d): delete some (rubinofs compact rm ID) or ask the mount owner to raise it",
			ErrTooMany, owner, n, max)
	}
	return nil
}

// checkOwnerBytes returns ErrTooLarge when adding add bytes to transcript
// id would take the transcripts its owner owns past max bytes together
// (max 0, or no owner: no cap). It runs inside the writing transaction.
func checkOwnerBytes(ctx context.Context, tx *sql.Tx, id string, add, max int64) error {
	if max <= 0 {
		return nil
	}
	var owner sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT owner FROM sessions WHERE id = ?`, id).Scan(&owner); err != nil || !owner.Valid {
		return err
	}
	var held int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes), 0) FROM sessions WHERE owner = ?`, owner.Int64).Scan(&held); err != nil {
		return err
	}
	if held+add > max {
		return fmt.Errorf("%w: the transcripts of uid %d hold %d bytes and this write adds %d, past compact.max_bytes_per_uid (%d bytes): nothing of it was stored; delete transcripts you no longer need (rubinofs compact rm ID) or ask the mount owner to raise the limit",
			ErrTooLarge, owner.Int64, held, add, max)
	}
	return nil
}

// ResolveIn is Resolve among the transcripts sc sees: a prefix that
// matches only transcripts sc may not see is ErrNotFound, and one that
// matches several counts only the visible ones, so the answer never tells
// a caller about another uid's transcripts.
func (s *Store) ResolveIn(ctx context.Context, sc Scope, idOrPrefix string) (string, error) {
	if sc.All {
		return s.Resolve(ctx, idOrPrefix)
	}
	p := strings.ToLower(strings.TrimSpace(idOrPrefix))
	if err := checkPrefix(p, idOrPrefix); err != nil {
		return "", err
	}
	ids, err := queryRows(ctx, s.db, scanString, `SELECT s.id FROM sessions s WHERE s.id GLOB ? AND `+sc.cond()+` ORDER BY s.id LIMIT 3`,
		append([]any{p + "*"}, sc.args()...)...)
	if err != nil {
		return "", err
	}
	return oneID(p, ids)
}

// subtree returns id and every session compacted from it, transitively
// (at most 100,000 levels).
func subtree(ctx context.Context, q querier, id string) ([]string, error) {
	return queryRows(ctx, q, scanString, `WITH RECURSIVE sub(id, depth) AS (
		SELECT id, 0 FROM sessions WHERE id = ?
		UNION ALL
		SELECT s.id, sub.depth + 1 FROM sessions s JOIN sub ON s.parent_session_id = sub.id WHERE sub.depth < `+maxDepthText+`
	) SELECT id FROM sub`, id)
}

// DeleteTree deletes transcript id (exact id) and every transcript
// compacted from it, with their messages, summaries and compaction runs,
// in one transaction: the children hold their parent's summary and link to
// it, so they cannot outlive it. It returns the ids deleted. ErrNotFound
// when id does not exist. The caller checks that the asker may use id
// (children have id's owner).
func (s *Store) DeleteTree(ctx context.Context, id string) ([]string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ids, err := subtree(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	set, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	const in = `(SELECT value FROM json_each(?))`
	for _, stmt := range []string{
		`DELETE FROM compaction_runs WHERE session_id IN ` + in + ` OR summary_id IN
			(SELECT id FROM summaries WHERE session_id IN ` + in + ` OR target_session_id IN ` + in + `)`,
		`DELETE FROM summaries WHERE session_id IN ` + in + ` OR target_session_id IN ` + in,
		`DELETE FROM messages WHERE session_id IN ` + in,
		`DELETE FROM sessions WHERE id IN ` + in,
	} {
		args := make([]any, strings.Count(stmt, "json_each(?)"))
		for i := range args {
			args[i] = string(set)
		}
		if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
			return nil, fmt.Errorf("deleting %s: %w", id, err)
		}
	}
	return ids, tx.Commit()
}
